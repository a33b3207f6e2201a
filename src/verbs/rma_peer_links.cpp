#include "verbs/rma_peer_links.h"

#include <sys/epoll.h>

#include <cerrno>
#include <cstring>

#include "core/byte_codec.h"
#include "core/listen_secret.h"
#include "verbs/rma_comm.h"
#include "weft/log.h"

namespace weft::verbs {

RmaPeerLinks::RmaPeerLinks(VerbsRmaComm& comm, std::unique_ptr<TcpListener> listener,
                           std::vector<SocketAddress> addresses, int meet_ms)
    : comm_(comm),
      listener_(std::move(listener)),
      addresses_(std::move(addresses)),
      links_(addresses_.size()),
      meet_timeout_(meet_ms) {}

void RmaPeerLinks::activate(uint32_t rank) {
  if (links_[rank].listed) return;
  links_[rank].listed = true;
  active_.push_back(rank);
}

bool RmaPeerLinks::open(std::string* error) {
  epoll_ = Fd(::epoll_create1(EPOLL_CLOEXEC));
  epoll_event event{};
  event.events = EPOLLIN;
  event.data.u64 = links_.size();
  if (!epoll_ || ::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, listener_->fd(), &event) != 0) {
    *error = std::string("epoll for the one-sided listener: ") + std::strerror(errno);
    return false;
  }
  return true;
}

void RmaPeerLinks::send(uint32_t rank, const RmaRecord& record) {
  std::lock_guard<std::mutex> lock(submit_mutex_);
  submitted_.emplace_back(rank, record);
  submissions_.store(true, std::memory_order_release);
}

void RmaPeerLinks::service() {
  const auto now = std::chrono::steady_clock::now();
  const int64_t now_ns =
      std::chrono::duration_cast<std::chrono::nanoseconds>(now.time_since_epoch()).count();
  if (now_ns < next_look_ns_.load(std::memory_order_relaxed) &&
      !under_way_.load(std::memory_order_acquire) &&
      !submissions_.load(std::memory_order_acquire)) {
    return;
  }
  std::unique_lock<std::mutex> lock(service_mutex_, std::try_to_lock);
  if (!lock.owns_lock()) return;
  const bool due = now >= next_look_;
  auto take_submissions = [&] {
    if (!submissions_.exchange(false, std::memory_order_acq_rel)) return;
    std::vector<std::pair<uint32_t, RmaRecord>> taken;
    {
      std::lock_guard<std::mutex> submit_lock(submit_mutex_);
      taken.swap(submitted_);
    }
    for (auto& [rank, record] : taken) {
      Link& link = links_[rank];
      if (link.state == State::Failed) {
        comm_.on_demand_send_failed(record, rank, link.why);
        continue;
      }
      link.outbox.push_back(record);
      if (link.state == State::Idle) call(rank);
      activate(rank);
    }
  };
  take_submissions();
  if (due) {
    // Once a millisecond when nothing is under way: one system call.
    next_look_ = now + std::chrono::milliseconds(1);
    next_look_ns_.store(now_ns + 1000000, std::memory_order_relaxed);
    epoll_event events[32];
    const int ready = ::epoll_wait(epoll_.get(), events, 32, 0);
    for (int i = 0; i < ready; ++i) {
      const uint64_t key = events[i].data.u64;
      if (key < links_.size()) {
        read_records(static_cast<uint32_t>(key));
        continue;
      }
      for (;;) {
        TcpStream accepted;
        std::string error;
        if (!listener_->accept(&accepted, &error)) {
          WEFT_WARN("%s: one-sided listener: %s", comm_.device_name().c_str(), error.c_str());
          break;
        }
        if (!accepted.valid()) break;
        if (newcomers_.size() >= kMaxNewcomers) {
          log_refused_connect("one-sided comm on " + comm_.device_name(), accepted.peer().text(),
                              "64 connections already wait to say who they are");
          continue;  // closed
        }
        newcomers_.push_back(Newcomer{std::move(accepted), {}, now + kNewcomerPatience});
      }
    }
    for (auto it = newcomers_.begin(); it != newcomers_.end();) {
      it = welcome(*it, now) ? it + 1 : newcomers_.erase(it);
    }
  }
  take_submissions();
  std::vector<uint32_t> looked;
  looked.swap(active_);
  for (uint32_t rank : looked) {
    Link& link = links_[rank];
    link.listed = false;
    if (meeting(link.state) && now > link.meet_by) {
      fail(rank, "the meeting did not finish within " + std::to_string(meet_timeout_.count()) +
                     " ms (WEFT_CONNECT_TIMEOUT_MS)");
      continue;
    }
    drive(rank);
    const bool sending =
        link.state == State::Ready && (link.record_sending || !link.outbox.empty());
    if (meeting(link.state) || sending) activate(rank);
  }
  under_way_.store(!active_.empty(), std::memory_order_release);
}

bool RmaPeerLinks::introduce(uint32_t rank, std::string* error) {
  if (!comm_.open_queue_pair(rank, error)) return false;
  RmaRecord hello;
  hello.kind = RmaRecordKind::Hello;
  hello.rank = static_cast<uint32_t>(comm_.rank());
  hello.ranks = static_cast<uint32_t>(comm_.rank_count());
  hello.proof = comm_.own_proof();
  Link& link = links_[rank];
  encode_rma_record(hello, link.out.data());
  comm_.encode_queue_pair(rank, link.out.data() + kRmaRecordSize);
  return true;
}

void RmaPeerLinks::call(uint32_t rank) {
  Link& link = links_[rank];
  std::string error;
  if (!introduce(rank, &error) ||
      !TcpStream::connect(addresses_[rank], &link.stream, &error, kOpenListenerRefusalGrace)) {
    fail(rank, error);
    return;
  }
  link.state = State::Calling;
  link.meet_by = std::chrono::steady_clock::now() + meet_timeout_;
}

bool RmaPeerLinks::accept_introduction(uint32_t rank, const uint8_t* bytes, std::string* error) {
  RmaRecord expected;
  expected.kind = RmaRecordKind::Hello;
  expected.ranks = static_cast<uint32_t>(comm_.rank_count());
  RmaRecord hello;
  if (!rma_record_proven(bytes, kRmaRecordSize, comm_.rank_secrets())) {
    *error = "its hello proved no rank's listen secret";
    return false;
  }
  if (!decode_rma_record(bytes, kRmaRecordSize, expected, static_cast<uint32_t>(comm_.rank()),
                         &hello, error)) {
    return false;
  }
  if (hello.rank != rank) {
    *error = "it said hello as rank " + std::to_string(hello.rank);
    return false;
  }
  return comm_.connect_queue_pair(rank, bytes + kRmaRecordSize, error);
}

bool RmaPeerLinks::welcome(Newcomer& newcomer, std::chrono::steady_clock::time_point now) {
  std::string error;
  TcpStream::Progress progress = newcomer.stream.receive_all(newcomer.in, &error);
  const std::string where = "one-sided comm on " + comm_.device_name();
  if (progress == TcpStream::Progress::Pending) {
    if (now < newcomer.until) return true;
    log_refused_connect(where, newcomer.stream.peer().text(),
                        "it said no hello within 10 s of connecting");
    return false;
  }
  if (progress == TcpStream::Progress::Failed) {
    log_refused_connect(where, newcomer.stream.peer().text(), error);
    return false;
  }
  // Anyone may connect here: the proof first, every refusal rate-limited.
  if (!rma_record_proven(newcomer.in.data(), kRmaRecordSize, comm_.rank_secrets())) {
    log_refused_connect(where, newcomer.stream.peer().text(),
                        "its hello proved no rank's listen secret");
    return false;
  }
  const uint32_t rank = get_le32(newcomer.in.data() + 8);  // proven: a rank of the comm
  if (rank == static_cast<uint32_t>(comm_.rank())) {
    log_refused_connect(where, newcomer.stream.peer().text(), "it said hello as this rank");
    return false;
  }
  Link& link = links_[rank];
  const bool calling = link.state == State::Calling || link.state == State::Awaiting;
  // Both called: the lower rank's call is kept.
  const bool take = link.state == State::Idle || link.state == State::Waiting ||
                    (calling && rank < static_cast<uint32_t>(comm_.rank()));
  if (!take) {
    if (!calling) {
      log_refused_connect(where, newcomer.stream.peer().text(),
                          "rank " + std::to_string(rank) + " called a second time");
    }
    return false;  // closed: its caller waits for this rank's call
  }
  if (!introduce(rank, &error) || !accept_introduction(rank, newcomer.in.data(), &error)) {
    fail(rank, error);
    return false;
  }
  link.stream = std::move(newcomer.stream);
  link.state = State::Answering;
  link.meet_by = now + meet_timeout_;
  activate(rank);
  return false;
}

void RmaPeerLinks::drive(uint32_t rank) {
  Link& link = links_[rank];
  std::string error;
  auto step = [&](TcpStream::Progress progress, State next) {
    if (progress == TcpStream::Progress::Done) link.state = next;
    if (progress == TcpStream::Progress::Failed) fail(rank, error);
    return progress == TcpStream::Progress::Done;
  };
  const std::span<uint8_t> hello_out(link.out.data(), kRmaRecordSize);
  const std::span<uint8_t> hello_in(link.in.data(), kRmaRecordSize);
  for (;;) {
    switch (link.state) {
      case State::Calling:
        if (!step(link.stream.send_all(link.out, &error), State::Awaiting)) return;
        continue;
      case State::Awaiting: {
        TcpStream::Progress progress = link.stream.receive_all(link.in, &error);
        if (progress == TcpStream::Progress::Pending) return;
        if (progress == TcpStream::Progress::Failed) {
          if (rank < static_cast<uint32_t>(comm_.rank())) {
            // The lower rank turned this call down: it is calling, and
            // its call is the one kept.
            link.stream = TcpStream();
            link.state = State::Waiting;
          } else {
            fail(rank, error);
          }
          return;
        }
        if (!accept_introduction(rank, link.in.data(), &error)) {
          fail(rank, error);
          return;
        }
        // The second hello: this end's queue pair is up too.
        link.state = State::Confirming;
        continue;
      }
      case State::Confirming:
        if (!step(link.stream.send_all(hello_out, &error), State::Ready)) return;
        become_ready(rank);
        continue;
      case State::Answering:
        if (!step(link.stream.send_all(link.out, &error), State::Welcoming)) return;
        continue;
      case State::Welcoming: {
        TcpStream::Progress progress = link.stream.receive_all(hello_in, &error);
        if (progress == TcpStream::Progress::Pending) return;
        RmaRecord expected;
        expected.kind = RmaRecordKind::Hello;
        expected.ranks = static_cast<uint32_t>(comm_.rank_count());
        RmaRecord hello;
        if (progress == TcpStream::Progress::Failed ||
            !rma_record_proven(link.in.data(), kRmaRecordSize, comm_.rank_secrets()) ||
            !decode_rma_record(link.in.data(), kRmaRecordSize, expected,
                               static_cast<uint32_t>(comm_.rank()), &hello, &error) ||
            hello.rank != rank) {
          fail(rank, error.empty() ? "its second hello is not its own" : error);
          return;
        }
        link.state = State::Ready;
        become_ready(rank);
        continue;
      }
      case State::Ready:
        if (!link.record_sending) {
          if (link.outbox.empty()) return;
          encode_rma_record(link.outbox.front(), link.record_out.data());
          link.outbox.pop_front();
          link.record_sending = true;
        }
        if (!step(link.stream.send_all(link.record_out, &error), State::Ready)) return;
        link.record_sending = false;
        continue;
      default:
        return;
    }
  }
}

void RmaPeerLinks::become_ready(uint32_t rank) {
  Link& link = links_[rank];
  epoll_event event{};
  event.events = EPOLLIN;
  event.data.u64 = rank;
  if (::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, link.stream.fd(), &event) != 0) {
    fail(rank, std::string("epoll: ") + std::strerror(errno));
    return;
  }
  WEFT_TRACE("%s: one-sided rank %u met", comm_.device_name().c_str(), rank);
  // What came with the second hello.
  read_records(rank);
}

void RmaPeerLinks::read_records(uint32_t rank) {
  Link& link = links_[rank];
  while (link.state == State::Ready) {
    std::string error;
    TcpStream::Progress progress = link.stream.receive_all(link.record_in, &error);
    if (progress == TcpStream::Progress::Pending) return;
    if (progress == TcpStream::Progress::Failed) {
      fail(rank, error);
      return;
    }
    comm_.take_on_demand_bytes(link.record_in.data(), kRmaRecordSize);
  }
}

void RmaPeerLinks::fail(uint32_t rank, const std::string& why) {
  Link& link = links_[rank];
  const bool was_ready = link.state == State::Ready;
  link.state = State::Failed;
  link.why = "rank " + std::to_string(rank) + " (" + addresses_[rank].text() + "): " + why;
  link.stream = TcpStream();  // closing it leaves the epoll set too
  if (was_ready && link.outbox.empty()) {
    // A rank closing its comm at the end, most often.
    WEFT_INFO(NCCL_NET, "%s: one-sided link to %s", comm_.device_name().c_str(), link.why.c_str());
  } else {
    WEFT_WARN("%s: one-sided link to %s", comm_.device_name().c_str(), link.why.c_str());
  }
  std::deque<RmaRecord> lost;
  lost.swap(link.outbox);
  for (const RmaRecord& record : lost) comm_.on_demand_send_failed(record, rank, link.why);
}

}  // namespace weft::verbs
