#include "task_pool.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <system_error>
#include <thread>
#include <vector>

namespace tfr {
namespace {

// How long a thread keeps looking (yielding the core) before it sleeps: a worker for the next
// call's parts, a caller for a worker's last part. Waking a sleeping thread costs tens of
// microseconds on a virtual machine (a C++ loop here: a worker asleep started its part 110 us
// after the call, an awake one 1-2 us after), as much as a part of a batch takes to decode; 1 ms
// covers the calls of a loop over 1024-record batches of VOC-like records (~600 us each at one
// thread). OpenMP runtimes spin for as long or longer before they sleep.
constexpr auto kSpin = std::chrono::microseconds(1000);

// Calls `ready` until it returns true (then true) or kSpin has passed (then false).
template <typename Ready>
bool spin_until(Ready ready) {
  const auto deadline = std::chrono::steady_clock::now() + kSpin;
  do {
    if (ready()) return true;
    std::this_thread::yield();
  } while (std::chrono::steady_clock::now() < deadline);
  return ready();
}

class TaskPool {
 public:
  void run(size_t count, size_t threads, const std::function<void(size_t)>& task) {
    Job job{&task, count, threads};
    std::unique_lock<std::mutex> lock(mutex_);
    start_workers(threads - 1);
    jobs_.push_back(&job);
    open_parts_.fetch_add(count, std::memory_order_release);
    for (size_t i = 1; i < threads; ++i) wake_.notify_one();
    while (job.next < job.count) run_part(job, lock);  // the caller takes parts too
    lock.unlock();
    // The parts still running are workers': wait for them, spinning first.
    auto finished = [&] { return job.done.load(std::memory_order_acquire) == job.count; };
    if (spin_until(finished)) return;
    lock.lock();
    finished_.wait(lock, finished);
  }

  // Starts workers until there are `wanted` and wakes those asleep without giving them work
  // (they look for work for kSpin, as after a part, then sleep again), if the last call came
  // within kSpin: then the calls are a loop's, and the next one finds them awake. A call long
  // after the last one leaves them asleep; waking a thread costs the caller too (an
  // inter-processor interrupt, a VM exit on a virtual machine).
  void wake(size_t wanted) {
    const int64_t now = std::chrono::duration_cast<std::chrono::nanoseconds>(
                            std::chrono::steady_clock::now().time_since_epoch())
                            .count();
    const int64_t last = last_wake_call_.exchange(now, std::memory_order_relaxed);
    if (now - last > std::chrono::nanoseconds(kSpin).count()) return;
    std::lock_guard<std::mutex> lock(mutex_);
    start_workers(wanted);
    if (awake_.load(std::memory_order_relaxed) >= workers_.size()) return;
    ++wakes_;
    wake_.notify_all();
  }

  size_t workers() {
    std::lock_guard<std::mutex> lock(mutex_);
    return workers_.size();
  }

  size_t awake() const { return awake_.load(std::memory_order_relaxed); }

  TaskPool* forgotten_next = nullptr;  // pools left behind by fork, kept reachable

 private:
  struct Job {
    const std::function<void(size_t)>* task;
    size_t count;
    size_t threads;               // at most this many of its parts run at once
    size_t next = 0;              // the next part to start
    size_t running = 0;           // parts running now
    std::atomic<size_t> done{0};  // parts finished (read without the lock by the caller)
  };

  // Runs the job's next part. Called with the lock held and a part left to start; returns with
  // the lock held. The job is not touched after its last part is counted done: its caller may
  // return at once.
  void run_part(Job& job, std::unique_lock<std::mutex>& lock) {
    const size_t part = job.next++;
    ++job.running;
    open_parts_.fetch_sub(1, std::memory_order_relaxed);
    if (job.next == job.count) jobs_.erase(std::find(jobs_.begin(), jobs_.end(), &job));
    lock.unlock();
    (*job.task)(part);
    lock.lock();
    --job.running;
    const size_t count = job.count;  // read first: once all parts are done, the job may be gone
    if (job.done.fetch_add(1, std::memory_order_acq_rel) + 1 == count) finished_.notify_all();
  }

  // The first job with a part left to start and room for another running part.
  Job* open_job() {
    for (Job* job : jobs_) {
      if (job->running < job->threads) return job;
    }
    return nullptr;
  }

  void work() {
    std::unique_lock<std::mutex> lock(mutex_);
    for (;;) {
      if (Job* job = open_job()) {
        run_part(*job, lock);
        continue;
      }
      lock.unlock();  // nothing to do: look for a while, then sleep
      spin_until([&] { return open_parts_.load(std::memory_order_acquire) > 0; });
      lock.lock();
      if (open_job() == nullptr) {
        awake_.fetch_sub(1, std::memory_order_relaxed);
        const uint64_t wakes = wakes_;
        wake_.wait(lock, [&] { return open_job() != nullptr || wakes_ != wakes; });
        awake_.fetch_add(1, std::memory_order_relaxed);
      }
    }
  }

  // Starts workers until there are `wanted`; fewer if the system refuses (the callers then do
  // more of the work themselves).
  void start_workers(size_t wanted) {
    while (workers_.size() < wanted) {
      awake_.fetch_add(1, std::memory_order_relaxed);  // a new worker starts awake
      try {
        workers_.emplace_back(&TaskPool::work, this);
      } catch (const std::system_error&) {
        awake_.fetch_sub(1, std::memory_order_relaxed);
        return;
      }
    }
  }

  std::mutex mutex_;
  std::condition_variable wake_;       // workers: a job has a part to start
  std::condition_variable finished_;   // callers: a job's last part is done
  std::deque<Job*> jobs_;              // jobs with parts left to start, oldest first
  std::atomic<size_t> open_parts_{0};  // parts not yet started, over all jobs (a hint to spinners)
  std::atomic<size_t> awake_{0};       // workers not asleep on wake_ (a hint to callers)
  uint64_t wakes_ = 0;                 // sleepers woken without a job by wake(), so far
  std::atomic<int64_t> last_wake_call_{INT64_MIN / 2};  // steady_clock ns of the last wake()
  std::vector<std::thread> workers_;  // never joined: the pool lives as long as the process
};

std::atomic<TaskPool*> g_pool{nullptr};
std::atomic<TaskPool*> g_forgotten{nullptr};

TaskPool& pool() {
  TaskPool* current = g_pool.load(std::memory_order_acquire);
  if (current != nullptr) return *current;
  auto* fresh = new TaskPool;
  if (g_pool.compare_exchange_strong(current, fresh, std::memory_order_acq_rel)) return *fresh;
  delete fresh;  // another thread made one first (this one started no thread yet)
  return *current;
}

}  // namespace

void run_tasks(size_t count, size_t threads, const std::function<void(size_t)>& task) {
  threads = std::min({threads, count, kMaxTaskThreads});
  if (threads <= 1) {
    for (size_t i = 0; i < count; ++i) task(i);
    return;
  }
  pool().run(count, threads, task);
}

size_t awake_task_workers() {
  TaskPool* current = g_pool.load(std::memory_order_acquire);
  return current == nullptr ? 0 : current->awake();
}

void wake_task_workers(size_t wanted) {
  if (wanted == 0) return;
  pool().wake(std::min(wanted, kMaxTaskThreads - 1));
}

size_t task_pool_threads() {
  TaskPool* current = g_pool.load(std::memory_order_acquire);
  return current == nullptr ? 0 : current->workers();
}

void forget_task_pool_after_fork() noexcept {
  TaskPool* old = g_pool.exchange(nullptr);
  if (old == nullptr) return;
  old->forgotten_next = g_forgotten.load();
  g_forgotten.store(old);
}

}  // namespace tfr
