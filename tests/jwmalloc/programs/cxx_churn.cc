// Multi-threaded churn of std::map, std::string and std::vector: the C++
// program the real-programs test builds and runs with and without jwmalloc
// (same output expected). Objects cross threads through a mutex-protected
// queue, so many frees are cross-thread. Prints a deterministic checksum.
// Usage: cxx_churn [THREADS] [ROUNDS]
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace {

struct Batch {
  std::map<std::string, std::vector<std::uint64_t>> entries;
};

std::mutex mu;
std::condition_variable cv;
std::deque<std::unique_ptr<Batch>> queue;
int producers_left;

std::uint64_t mix(std::uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  return x ^ (x >> 33);
}

void produce(int id, int rounds) {
  std::uint64_t seed = 1000003ULL * (id + 1);
  for (int r = 0; r < rounds; r++) {
    auto b = std::make_unique<Batch>();
    int n = 20 + static_cast<int>(mix(seed + r) % 60);
    for (int i = 0; i < n; i++) {
      seed = mix(seed + i);
      std::string key = "key-" + std::to_string(seed % 100000) + std::string(seed % 40, 'x');
      std::vector<std::uint64_t> v(1 + seed % 50);
      for (std::size_t j = 0; j < v.size(); j++) v[j] = mix(seed + j);
      b->entries[key] = std::move(v);
    }
    std::lock_guard<std::mutex> g(mu);
    queue.push_back(std::move(b));
    cv.notify_one();
  }
  std::lock_guard<std::mutex> g(mu);
  producers_left--;
  cv.notify_all();
}

std::uint64_t consume() {
  std::uint64_t sum = 0;
  for (;;) {
    std::unique_ptr<Batch> b;
    {
      std::unique_lock<std::mutex> g(mu);
      cv.wait(g, [] { return !queue.empty() || producers_left == 0; });
      if (queue.empty()) return sum;
      b = std::move(queue.front());
      queue.pop_front();
    }
    std::map<std::string, std::size_t> sizes;
    for (auto &kv : b->entries) {
      std::uint64_t h = 0;
      for (auto x : kv.second) h += x;
      sizes[kv.first.substr(0, 8)] += kv.second.size();
      sum += h ^ kv.first.size();
    }
    sum += sizes.size();
  }  // the batch (made by a producer) is freed here, on this thread
}

}  // namespace

int main(int argc, char **argv) {
  int threads = argc > 1 ? std::atoi(argv[1]) : 4;
  int rounds = argc > 2 ? std::atoi(argv[2]) : 300;
  producers_left = threads;
  std::vector<std::thread> ps, cs;
  std::vector<std::uint64_t> sums(threads);
  for (int i = 0; i < threads; i++) ps.emplace_back(produce, i, rounds);
  for (int i = 0; i < threads; i++) cs.emplace_back([&sums, i] { sums[i] = consume(); });
  for (auto &t : ps) t.join();
  for (auto &t : cs) t.join();
  std::uint64_t total = 0;
  for (auto s : sums) total += s;  // addition commutes: same total whatever thread consumed what
  std::printf("threads=%d rounds=%d checksum=%llu\n", threads, rounds, static_cast<unsigned long long>(total));
  return 0;
}
