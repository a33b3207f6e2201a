// Every object handed to the application is a verbs struct followed by a
// pointer to its owner, so a verbs pointer leads back to the owner.
#pragma once

namespace softverbs {

template <typename Verbs, typename Owner>
struct Handle {
  Verbs verbs;
  Owner* owner;
};

template <typename Owner, typename Verbs>
Owner* owner_of(Verbs* verbs) {
  if (verbs == nullptr) return nullptr;
  return reinterpret_cast<Handle<Verbs, Owner>*>(verbs)->owner;
}

}  // namespace softverbs
