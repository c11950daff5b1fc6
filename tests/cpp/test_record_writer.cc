// The record writer into in-memory sinks: its bytes against the format written out by hand, the
// buffer's thresholds, writer-then-reader round trips (plain, gzip, zlib), a sink that fails at
// every byte, flush/close rules, and records from concurrent threads that never interleave.
#include <condition_variable>
#include <mutex>
#include <random>
#include <stdexcept>
#include <thread>

#include "record_fixtures.h"
#include "record_writer.h"

using fixtures::frames;
using fixtures::numbered;
using fixtures::StringSink;

namespace {

struct Written {
  std::shared_ptr<StringSink::Log> log = std::make_shared<StringSink::Log>();
  std::unique_ptr<tfr::RecordWriter> writer;
};

Written writer_into_memory(size_t buffer_size, fixtures::Faults faults = {},
                           tfr::Compression compression = tfr::Compression::kNone, int level = -1) {
  Written w;
  w.writer = std::make_unique<tfr::RecordWriter>(
      tfr::maybe_deflate(std::make_unique<StringSink>(w.log, faults), compression, level),
      buffer_size);
  return w;
}

void write(tfr::RecordWriter& writer, const std::string& payload) {
  writer.write(fixtures::bytes(payload), payload.size());
}

// Payload sizes on either side of the writer's thresholds for a buffer of `capacity` bytes:
// records of more than capacity / 2 framed bytes bypass the buffer, and a record that does not
// fit in what is left of it drains the buffer first.
std::vector<std::string> around_thresholds(size_t capacity) {
  std::vector<std::string> out;
  size_t i = 0;
  for (size_t framed : {capacity / 2 - 1, capacity / 2, capacity / 2 + 1, capacity - 1, capacity,
                        capacity + 1, 2 * capacity + 3}) {
    out.push_back("s");  // small ones between, so the buffer holds something at each big one
    out.push_back(numbered(i++, framed - tfr::kFramingSize));
    out.push_back("");
  }
  return out;
}

const std::vector<std::string> kFourRecords = {"foo", "bar", "", "xxxx"};

}  // namespace

TEST(bytes_follow_the_format) {
  for (size_t buffer : {size_t(0), size_t(4096), size_t(4097), size_t(65536)}) {
    Written w = writer_into_memory(buffer);
    for (const std::string& p : kFourRecords) write(*w.writer, p);
    CHECK_EQ(w.writer->records_written(), 4u);
    w.writer->close();
    CHECK_EQ(w.log->data, frames(kFourRecords)) << "buffer " << buffer;
    CHECK_EQ(w.log->closes, 1);
  }
}

TEST(records_around_the_buffer_thresholds_keep_their_order) {
  for (size_t buffer : {size_t(4096), size_t(4097), size_t(8192)}) {
    const auto payloads = around_thresholds(buffer);
    Written w = writer_into_memory(buffer);
    for (const std::string& p : payloads) write(*w.writer, p);
    w.writer->close();
    CHECK(w.log->data == frames(payloads)) << "buffer " << buffer;
    fixtures::expect_records(w.log->data, payloads, {}, {}, "buffer " + std::to_string(buffer));
  }
}

TEST(write_batch_is_a_run_of_writes) {
  const std::vector<std::string> payloads = around_thresholds(4096);
  std::string joined;
  std::vector<int64_t> offsets{0};
  for (const std::string& p : payloads) {
    joined += p;
    offsets.push_back(int64_t(joined.size()));
  }
  Written w = writer_into_memory(4096);
  w.writer->write_batch(fixtures::bytes(joined), offsets.data(), 0);
  CHECK_EQ(w.writer->records_written(), 0u);
  // A slice that does not start at offset 0, then the rest.
  w.writer->write_batch(fixtures::bytes(joined), offsets.data() + 2, payloads.size() - 2);
  w.writer->write_batch(fixtures::bytes(joined), offsets.data(), 2);
  CHECK_EQ(w.writer->records_written(), payloads.size());
  w.writer->close();
  std::vector<std::string> reordered(payloads.begin() + 2, payloads.end());
  reordered.insert(reordered.end(), payloads.begin(), payloads.begin() + 2);
  CHECK(w.log->data == frames(reordered));
}

TEST(write_all_is_a_run_of_writes) {
  const std::vector<std::string> payloads = around_thresholds(4096);
  std::vector<tfr::RecordWriter::View> views;
  for (const std::string& p : payloads) views.push_back({fixtures::bytes(p), p.size()});
  Written w = writer_into_memory(4096);
  w.writer->write_all(views.data(), 0);
  w.writer->write_all(views.data(), 3);
  write(*w.writer, "between");
  w.writer->write_all(views.data() + 3, views.size() - 3);
  CHECK_EQ(w.writer->records_written(), payloads.size() + 1);
  w.writer->close();
  std::vector<std::string> want(payloads.begin(), payloads.begin() + 3);
  want.push_back("between");
  want.insert(want.end(), payloads.begin() + 3, payloads.end());
  CHECK(w.log->data == frames(want));
}

TEST(headers_of_repeated_and_changing_sizes) {
  // Records of one size share a header the writer computes once; each new size gets its own,
  // in and out of the buffer (a record past half the buffer goes to the sink directly).
  const std::vector<std::string> payloads = {"aaaa",
                                             "bbbb",
                                             "cccc",
                                             "",
                                             "",
                                             "dd",
                                             "eeee",
                                             std::string(3000, 'f'),
                                             std::string(3000, 'g'),
                                             "hhhh",
                                             std::string(3000, 'i'),
                                             "",
                                             "jjjj"};
  Written w = writer_into_memory(4096);
  for (const std::string& p : payloads) write(*w.writer, p);
  w.writer->close();
  CHECK(w.log->data == frames(payloads));
}

TEST(small_records_are_coalesced_into_few_sink_writes) {
  Written w = writer_into_memory(65536);
  std::vector<std::string> payloads;
  for (size_t i = 0; i < 10000; ++i) payloads.push_back(numbered(i, i % 50));
  for (const std::string& p : payloads) write(*w.writer, p);
  w.writer->close();
  const size_t total = frames(payloads).size();
  CHECK(size_t(w.log->writes) <= total / 65536 + 1) << w.log->writes << " writes of " << total;
  CHECK(w.log->data == frames(payloads));
}

TEST(flush_hands_everything_to_the_sink) {
  Written w = writer_into_memory(1 << 20);
  write(*w.writer, "one");
  CHECK_EQ(w.log->data, std::string()) << "small records wait in the buffer";
  w.writer->flush(false);
  CHECK_EQ(w.log->data, frames({"one"}));
  CHECK_EQ(w.log->flushes, 1);
  CHECK_EQ(w.log->syncs, 0);
  write(*w.writer, "two");
  w.writer->flush(true);
  CHECK_EQ(w.log->data, frames({"one", "two"}));
  CHECK_EQ(w.log->syncs, 1);
  w.writer->flush(true);  // nothing new: still passed on
  CHECK_EQ(w.log->flushes, 3);
}

TEST(close_is_final_and_idempotent) {
  Written w = writer_into_memory(4096);
  write(*w.writer, "one");
  w.writer->close();
  w.writer->close();
  CHECK_EQ(w.log->closes, 1);
  CHECK_EQ(w.log->data, frames({"one"}));
  CHECK(check::thrown<std::logic_error>([&] { write(*w.writer, "two"); }));
  CHECK(check::thrown<std::logic_error>([&] { w.writer->flush(false); }));
  CHECK(!w.writer->try_write_buffered(fixtures::bytes("x"), 1));
  CHECK_EQ(w.writer->records_written(), 1u);
  CHECK_EQ(w.log->data, frames({"one"}));
}

TEST(the_destructor_closes) {
  auto log = std::make_shared<StringSink::Log>();
  {
    tfr::RecordWriter writer(std::make_unique<StringSink>(log), 4096);
    writer.write(fixtures::bytes("kept"), 4);
  }
  CHECK_EQ(log->data, frames({"kept"}));
  CHECK_EQ(log->closes, 1);
  {
    tfr::RecordWriter writer(
        std::make_unique<StringSink>(log, fixtures::Faults{log->data.size() + 5}), 4096);
    writer.write(fixtures::bytes("lost"), 4);
  }  // the sink fails while closing: swallowed by the destructor
  CHECK_EQ(log->closes, 2);
}

TEST(try_write_buffered_only_copies) {
  Written w = writer_into_memory(4096);
  const std::string fits(4096 / 2 - tfr::kFramingSize, 'a');
  const std::string too_big(fits.size() + 1, 'b');
  CHECK(w.writer->try_write_buffered(fixtures::bytes(fits), fits.size()));
  CHECK(!w.writer->try_write_buffered(fixtures::bytes(too_big), too_big.size()))
      << "bypasses the buffer";
  CHECK(w.writer->try_write_buffered(fixtures::bytes(fits), fits.size()));
  CHECK(!w.writer->try_write_buffered(fixtures::bytes("c"), 1))
      << "the buffer is full: a drain is I/O";
  CHECK_EQ(w.log->writes, 0);
  write(*w.writer, "c");
  CHECK_EQ(w.writer->records_written(), 3u);
  w.writer->close();
  CHECK(w.log->data == frames({fits, fits, "c"}));
}

namespace {

// A sink whose flush waits until the test lets it go, to hold the writer's lock from a thread.
class GateSink final : public tfr::Sink {
 public:
  GateSink() : Sink("<gate>") {}
  void write(const uint8_t*, size_t) override {}
  void flush(bool) override {
    std::unique_lock<std::mutex> lock(mu_);
    in_flush_ = true;
    cv_.notify_all();
    cv_.wait(lock, [&] { return released_; });
  }
  void close() override {}

  void wait_for_flush() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return in_flush_; });
  }
  void release() {
    std::lock_guard<std::mutex> lock(mu_);
    released_ = true;
    cv_.notify_all();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool in_flush_ = false;
  bool released_ = false;
};

}  // namespace

TEST(try_write_buffered_never_waits_for_a_flush) {
  auto sink = std::make_unique<GateSink>();
  GateSink* gate = sink.get();
  tfr::RecordWriter writer(std::move(sink), 4096);
  std::thread flusher([&] { writer.flush(true); });
  gate->wait_for_flush();
  CHECK(!writer.try_write_buffered(fixtures::bytes("x"), 1)) << "the flush holds the writer";
  gate->release();
  flusher.join();
  CHECK(writer.try_write_buffered(fixtures::bytes("x"), 1));
  CHECK_EQ(writer.records_written(), 1u);
}

// The sink takes `room` bytes and then fails (a full disk), at every byte of the stream: the
// writer reports it, refuses more, and the sink holds exactly the stream's first `room` bytes,
// which a reader reads as the whole records in them and then, if it ends inside one, kTruncated.
TEST(a_sink_failing_at_every_byte) {
  const std::vector<std::string> payloads = {"abc", numbered(1, 3000), "", numbered(3, 100),
                                             numbered(4, 5000)};
  const std::string stream = frames(payloads);
  for (size_t room = 0; room <= stream.size(); ++room) {
    Written w = writer_into_memory(4096, {room});
    auto error = check::thrown<tfr::IoError>([&] {
      for (const std::string& p : payloads) write(*w.writer, p);
      w.writer->flush(false);
    });
    CHECK_EQ(bool(error), room < stream.size()) << "room " << room;
    if (error) {
      CHECK_EQ(error->err, ENOSPC);
      CHECK(check::thrown<tfr::IoError>([&] { write(*w.writer, "more"); })) << "room " << room;
      CHECK(check::thrown<tfr::IoError>([&] { w.writer->flush(false); })) << "room " << room;
      CHECK(!w.writer->try_write_buffered(fixtures::bytes("x"), 1));
    }
    w.writer->close();
    CHECK_EQ(w.log->closes, 1);
    CHECK(w.log->data == stream.substr(0, room)) << "room " << room;
    fixtures::expect_cut(stream, payloads, room, {}, {}, "room " + std::to_string(room));
  }
}

TEST(compressed_round_trip) {
  std::vector<std::string> payloads = around_thresholds(4096);
  for (size_t i = 0; i < 300; ++i) payloads.push_back(numbered(i, (i * 37) % 700));
  const std::string stream = frames(payloads);
  for (tfr::Compression compression : {tfr::Compression::kGzip, tfr::Compression::kZlib}) {
    for (int level : {-1, 0, 1, 9}) {
      Written w = writer_into_memory(4096, {}, compression, level);
      for (const std::string& p : payloads) write(*w.writer, p);
      w.writer->close();
      auto inflated = fixtures::decompress(w.log->data, compression);
      REQUIRE(inflated) << "level " << level << ": zlib reads the writer's output";
      CHECK(*inflated == stream) << "level " << level;
      tfr::RecordReader reader(tfr::maybe_inflate(fixtures::source(w.log->data), compression), {});
      auto got = fixtures::read_all(reader);
      CHECK(!got.loss);
      CHECK(got.records == payloads) << "level " << level;
    }
  }
}

TEST(bad_compression_levels) {
  for (int level : {-2, 10, 100}) {
    auto log = std::make_shared<StringSink::Log>();
    CHECK(check::thrown<std::invalid_argument>([&] {
      tfr::maybe_deflate(std::make_unique<StringSink>(log), tfr::Compression::kGzip, level);
    })) << "level "
        << level;
  }
}

// Each flush makes everything written so far readable while the stream stays open.
TEST(compressed_flush_makes_the_records_so_far_readable) {
  for (tfr::Compression compression : {tfr::Compression::kGzip, tfr::Compression::kZlib}) {
    Written w = writer_into_memory(4096, {}, compression, 6);
    std::vector<std::string> payloads;
    for (size_t i = 0; i < 5; ++i) {
      payloads.push_back(numbered(i, 10 + 1000 * i));
      write(*w.writer, payloads.back());
      w.writer->flush(false);
      tfr::RecordReader reader(tfr::maybe_inflate(fixtures::source(w.log->data), compression), {});
      auto got = fixtures::read_all(reader);
      CHECK(!got.loss) << "after record " << i;
      CHECK(got.records == payloads) << "after record " << i;
    }
    w.writer->close();
    CHECK(fixtures::decompress(w.log->data, compression) == frames(payloads));
  }
}

// A compressed stream whose sink fails is left cut where it failed (finishing it would append
// bytes that decode wrongly): a reader gets whole records, then a clean end or kTruncated.
TEST(compressed_sink_failing) {
  std::vector<std::string> payloads;
  for (size_t i = 0; i < 50; ++i) payloads.push_back(numbered(i, 97 * i));
  const std::string stream = frames(payloads);
  for (tfr::Compression compression : {tfr::Compression::kGzip, tfr::Compression::kZlib}) {
    Written whole = writer_into_memory(4096, {}, compression, 0);
    for (const std::string& p : payloads) write(*whole.writer, p);
    whole.writer->close();
    const size_t full = whole.log->data.size();
    for (size_t room = 0; room < full; room += 1 + room / 3) {
      Written w = writer_into_memory(4096, {room}, compression, 0);
      auto error = check::thrown<tfr::IoError>([&] {
        for (const std::string& p : payloads) write(*w.writer, p);
        w.writer->close();
      });
      REQUIRE(error) << "room " << room;
      w.writer->close();
      CHECK_EQ(w.log->closes, 1);
      CHECK(!fixtures::decompress(w.log->data, compression)) << "room " << room << ": not finished";
      const std::string available = fixtures::inflatable_prefix(w.log->data, compression);
      CHECK(stream.compare(0, available.size(), available) == 0) << "room " << room;
      tfr::RecordReader reader(tfr::maybe_inflate(fixtures::source(w.log->data), compression), {});
      auto got = fixtures::read_all(reader);
      CHECK(got.records == fixtures::first(payloads, got.records.size())) << "room " << room;
      CHECK(!got.loss || got.loss->reason == tfr::LossReason::kTruncated) << "room " << room;
    }
  }
}

// Once any call failed, every later write and flush is refused, whichever call met the failure:
// a write, or a flush (compressed bytes lost in a flush leave a hole in the stream, and a failed
// fsync may have lost data). So even when the sink has room again, it holds the start of the
// stream: read back as whole records, then a clean end or kTruncated, never garbage.
TEST(after_any_failure_the_writer_refuses_more) {
  std::vector<std::string> payloads;  // random bytes: deflate's output keeps up with its input
  std::mt19937 rng(1);
  for (size_t i = 0; i < 60; ++i) {
    payloads.emplace_back(50 + 31 * i, '\0');
    for (char& c : payloads.back()) c = char(rng());
  }
  const std::string stream = frames(payloads);
  auto write_all = [&](tfr::RecordWriter& writer, const std::string& context) {
    bool failed = false;
    for (size_t i = 0; i < payloads.size(); ++i) {
      auto error = check::thrown<tfr::IoError>([&] {
        write(writer, payloads[i]);
        if (i % 10 == 9) writer.flush(false);
      });
      CHECK(error || !failed) << context << ": record " << i << " accepted after a failure";
      failed |= bool(error);
    }
    check::thrown<tfr::IoError>([&] { writer.close(); });
  };
  for (tfr::Compression compression :
       {tfr::Compression::kNone, tfr::Compression::kGzip, tfr::Compression::kZlib}) {
    Written whole = writer_into_memory(4096, {}, compression, 6);
    write_all(*whole.writer, "no faults");
    std::vector<fixtures::Faults> faults = {{SIZE_MAX, false, true}};
    for (size_t room = 0; room < whole.log->data.size(); room += 1 + room / 8) {
      faults.push_back({room, true, false});
    }
    for (const fixtures::Faults& f : faults) {
      const std::string context = "compression " + std::to_string(int(compression)) + ", room " +
                                  std::to_string(f.capacity) + (f.failing_flush ? ", fsync" : "");
      Written w = writer_into_memory(4096, f, compression, 6);
      write_all(*w.writer, context);
      const std::string plain = compression == tfr::Compression::kNone
                                    ? w.log->data
                                    : fixtures::inflatable_prefix(w.log->data, compression);
      CHECK(stream.compare(0, plain.size(), plain) == 0) << context << ": the start of the stream";
      tfr::RecordReader reader(tfr::maybe_inflate(fixtures::source(w.log->data), compression), {});
      auto got = fixtures::read_all(reader);
      CHECK(got.records == fixtures::first(payloads, got.records.size())) << context;
      CHECK(!got.loss || got.loss->reason == tfr::LossReason::kTruncated)
          << context << ": " << (got.loss ? got.loss->what() : "");
    }
  }
}

// Records from several threads at once: each arrives whole, and each thread's in its order.
TEST(concurrent_writers_never_interleave_records) {
  constexpr size_t kThreads = 4, kEach = 2000;
  Written w = writer_into_memory(4096);
  auto payload = [](size_t thread, size_t i) {
    return std::to_string(thread) + ":" + numbered(i, i % 7 == 0 ? 3000 : i % 40);
  };
  std::vector<std::thread> threads;
  for (size_t t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (size_t i = 0; i < kEach; ++i) {
        const std::string p = payload(t, i);
        if (!w.writer->try_write_buffered(fixtures::bytes(p), p.size())) write(*w.writer, p);
      }
    });
  }
  for (std::thread& t : threads) t.join();
  w.writer->close();
  CHECK_EQ(w.writer->records_written(), kThreads * kEach);
  auto got = fixtures::read_all(w.log->data);
  CHECK(!got.loss);
  REQUIRE_EQ(got.records.size(), kThreads * kEach);
  std::vector<size_t> next(kThreads, 0);
  for (const std::string& r : got.records) {
    const size_t t = size_t(r[0] - '0');
    REQUIRE(t < kThreads);
    CHECK_EQ(r, payload(t, next[t]));
    ++next[t];
  }
}

RUN_ALL_TESTS()
