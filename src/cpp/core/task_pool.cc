#include "task_pool.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <system_error>
#include <thread>
#include <vector>

namespace tfr {
namespace {

class TaskPool {
 public:
  void run(size_t count, size_t threads, const std::function<void(size_t)>& task) {
    Job job{&task, count, threads};
    job.active = 1;  // the caller
    std::unique_lock<std::mutex> lock(mutex_);
    start_workers(threads - 1);
    jobs_.push_back(&job);
    for (size_t i = 1; i < threads; ++i) wake_.notify_one();
    work_on(job, lock);
    finished_.wait(lock, [&] { return job.done == job.count; });
  }

  size_t workers() {
    std::lock_guard<std::mutex> lock(mutex_);
    return workers_.size();
  }

  TaskPool* forgotten_next = nullptr;  // pools left behind by fork, kept reachable

 private:
  struct Job {
    const std::function<void(size_t)>* task;
    size_t count;
    size_t threads;     // at most this many threads work on it
    size_t next = 0;    // the next part to start
    size_t done = 0;    // parts finished
    size_t active = 0;  // threads that joined it (each stays until no part is left to start)
  };

  // Runs parts of `job` until none is left to start. Called and returns with the lock held. The
  // job lives as long as a part is not done, so it is not touched after the last `done`.
  void work_on(Job& job, std::unique_lock<std::mutex>& lock) {
    bool more = job.next < job.count;
    while (more) {
      const size_t part = job.next++;
      if (job.next == job.count) jobs_.erase(std::find(jobs_.begin(), jobs_.end(), &job));
      lock.unlock();
      (*job.task)(part);
      lock.lock();
      more = job.next < job.count;
      if (++job.done == job.count) finished_.notify_all();
    }
  }

  // The first job with a part left to start and room for another thread.
  Job* open_job() {
    for (Job* job : jobs_) {
      if (job->active < job->threads) return job;
    }
    return nullptr;
  }

  void work() {
    std::unique_lock<std::mutex> lock(mutex_);
    for (;;) {
      Job* job = nullptr;
      wake_.wait(lock, [&] { return (job = open_job()) != nullptr; });
      ++job->active;
      work_on(*job, lock);
    }
  }

  // Starts workers until there are `wanted`; fewer if the system refuses (the callers then do
  // more of the work themselves).
  void start_workers(size_t wanted) {
    while (workers_.size() < wanted) {
      try {
        workers_.emplace_back(&TaskPool::work, this);
      } catch (const std::system_error&) {
        return;
      }
    }
  }

  std::mutex mutex_;
  std::condition_variable wake_;      // workers: a job has a part to start
  std::condition_variable finished_;  // callers: a job's last part is done
  std::deque<Job*> jobs_;             // jobs with parts left to start, oldest first
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
