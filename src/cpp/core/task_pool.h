// A small pool of worker threads, one per process, that runs the parts of one call in parallel:
// the calling thread takes its share, so a call never waits for a worker that is slow to wake.
// Portable C++ (std::thread, std::mutex, std::condition_variable); several threads may run
// calls on it at once.
#pragma once

#include <cstddef>
#include <functional>

namespace tfr {

// At most this many threads work on one call (the caller included); more are not started.
constexpr size_t kMaxTaskThreads = 64;

// Runs task(0) .. task(count - 1), each once, on up to `threads` threads (the caller's among
// them), and returns when all have finished. Parts are started in index order. `task` must not
// throw. If no worker thread can be started, the caller runs every part.
void run_tasks(size_t count, size_t threads, const std::function<void(size_t)>& task);

// How many worker threads the process's pool has started (the caller's thread not counted).
size_t task_pool_threads();

// How many of them are awake now: working, or looking for work before they sleep. A hint: a
// sleeping worker takes tens of microseconds to wake on a virtual machine (over 100 measured),
// an awake one about one.
size_t awake_task_workers();

// For a call with too little work to wait for sleeping workers, which it runs without them: when
// such calls come close together (a loop's), makes sure the pool has `wanted` worker threads and
// wakes those asleep without giving them work, so that the next call finds them awake. Calls
// further apart leave them asleep: they would sleep again before the next call.
void wake_task_workers(size_t wanted);

// Call in the child after fork(): the parent's worker threads do not exist there, so the next
// run_tasks starts a new pool. The old pool's memory is left alone (its locks may be held by
// threads that are gone).
void forget_task_pool_after_fork() noexcept;

}  // namespace tfr
