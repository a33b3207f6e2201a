#include "verbs/listener_hub.h"

#include "core/listen_secret.h"

namespace weft::verbs {

std::shared_ptr<ListenerHub> ListenerHub::open(const SocketAddress& local, int connect_timeout_ms,
                                               std::string* error) {
  std::unique_ptr<TcpListener> listener = TcpListener::open(local, error);
  if (!listener) return nullptr;
  return std::shared_ptr<ListenerHub>(new ListenerHub(std::move(listener), connect_timeout_ms));
}

void ListenerHub::add(uint32_t listen_id) {
  std::lock_guard<std::mutex> lock(mutex_);
  ready_[listen_id];
}

void ListenerHub::remove(uint32_t listen_id) {
  std::lock_guard<std::mutex> lock(mutex_);
  ready_.erase(listen_id);
}

bool ListenerHub::accept_locked(std::string* error) {
  const auto now = std::chrono::steady_clock::now();
  if (now < next_accept_) return true;
  while (reading_.size() < kMaxReading) {
    TcpStream stream;
    if (!listener_->accept(&stream, error)) return false;
    if (!stream.valid()) {
      next_accept_ = now + kAcceptInterval;
      return true;
    }
    Reading reading;
    reading.arrival.stream = std::move(stream);
    reading.deadline = std::chrono::steady_clock::now() + timeout_;
    reading_.push_back(std::move(reading));
  }
  return true;
}

void ListenerHub::read_locked() {
  const auto now = std::chrono::steady_clock::now();
  for (size_t i = 0; i < reading_.size();) {
    Reading& reading = reading_[i];
    std::string error;
    TcpStream::Progress progress = reading.arrival.stream.receive_all(reading.arrival.info, &error);
    if (progress == TcpStream::Progress::Pending && now >= reading.deadline) {
      progress = TcpStream::Progress::Failed;
      error = "no connection info from " + reading.arrival.stream.peer().text() + " within " +
              "WEFT_CONNECT_TIMEOUT_MS=" + std::to_string(timeout_.count()) + " ms";
    }
    if (progress == TcpStream::Progress::Pending) {
      ++i;
      continue;
    }
    Arrival arrival = std::move(reading.arrival);
    reading_[i] = std::move(reading_.back());
    reading_.pop_back();
    if (progress == TcpStream::Progress::Failed) {
      // A stray or broken connection must not end the listener: the
      // connecting side reports its own failure.
      log_refused_connect("verbs side channel " + address().text(), arrival.stream.peer().text(),
                          error);
      continue;
    }
    route_locked(std::move(arrival));
  }
}

void ListenerHub::route_locked(Arrival arrival) {
  ConnectionInfo info;
  std::string problem;
  const std::string peer = arrival.stream.peer().text();
  if (!decode_connection_info(arrival.info, sizeof(arrival.info), Role::Sender, &info, &problem)) {
    log_refused_connect("verbs side channel " + address().text(), peer,
                        "bad connection info: " + problem);
    return;
  }
  auto waiting = ready_.find(info.listen_id);
  if (waiting == ready_.end()) {
    log_refused_connect("verbs side channel " + address().text(), peer,
                        "it names listener " + std::to_string(info.listen_id) +
                            ", which is not open here (closed, or a stale handle)");
    return;
  }
  waiting->second.push_back(std::move(arrival));
}

bool ListenerHub::take(uint32_t listen_id, size_t max, std::vector<Arrival>* out,
                       std::string* error) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!accept_locked(error)) return false;
  read_locked();
  auto waiting = ready_.find(listen_id);
  if (waiting == ready_.end()) return true;
  std::vector<Arrival>& arrivals = waiting->second;
  const size_t n = std::min(max, arrivals.size());
  for (size_t i = 0; i < n; ++i) out->push_back(std::move(arrivals[i]));
  arrivals.erase(arrivals.begin(), arrivals.begin() + static_cast<std::ptrdiff_t>(n));
  return true;
}

}  // namespace weft::verbs
