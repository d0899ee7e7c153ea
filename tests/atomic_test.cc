// Atomic replacement of a target (writer/atomic_file): a writer killed between naming its finished
// file and the rename leaves the old target intact and a leftover that the next build removes;
// concurrent writers never delete each other's files; a leftover a live process locks is left alone.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <thread>

#include "format/error.h"
#include "reader/dataset.h"
#include "tests/test_util.h"
#include "writer/atomic_file.h"
#include "writer/build.h"

namespace dsc::test {
namespace {

namespace fs = std::filesystem;

writer::BuildOptions Quiet() {
  writer::BuildOptions o;
  o.threads = 1;
  o.log = [](const std::string&) {};
  return o;
}

// Hidden temporaries of `name` in `dir` (".NAME.dsc-tmp-*").
std::vector<std::string> Leftovers(const std::string& dir, const std::string& name) {
  std::vector<std::string> out;
  const std::string prefix = "." + name + ".dsc-tmp-";
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().filename().string().rfind(prefix, 0) == 0) out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

// Starts `dsc build SRC OUT` with the test hook that stops it (SIGSTOP) right after its finished file
// got its temporary name and before the rename; returns once it is stopped there.
pid_t StartStoppedBuild(const std::string& src, const std::string& out) {
  pid_t pid = ::fork();
  if (pid == 0) {
    ::setenv("DSC_TEST_STOP_BEFORE_RENAME", "1", 1);
    std::freopen("/dev/null", "w", stdout);
    ::execl(DSC_BINARY, DSC_BINARY, "build", src.c_str(), out.c_str(), "--quiet", "--threads", "1", (char*)nullptr);
    ::_exit(127);
  }
  int st = 0;
  EXPECT_EQ(::waitpid(pid, &st, WUNTRACED), pid);
  EXPECT_TRUE(WIFSTOPPED(st)) << "the build did not stop in the rename window (status " << st << ")";
  return pid;
}

TEST(AtomicFile, KillInTheRenameWindowKeepsTheOldTargetAndTheNextBuildRemovesTheLeftover) {
  const auto old_src = SubsetTree(2), new_src = SubsetTree(5);
  const auto dir = ScratchDir();
  const std::string target = dir + "/t.beton";
  writer::Build(old_src, target, Quiet());
  const auto old_bytes = ReadFile(target);

  pid_t pid = StartStoppedBuild(new_src, target);
  auto left = Leftovers(dir, "t.beton");
  ASSERT_EQ(left.size(), 1u);
  // The name must not be guessable from the writer (it was ".t.beton.dsc-tmp-PID", which another
  // writer with a recycled PID deleted).
  EXPECT_EQ(left[0].find(std::to_string(pid)), std::string::npos) << left[0];
  ::kill(pid, SIGKILL);
  int st = 0;
  ::waitpid(pid, &st, 0);
  ASSERT_TRUE(WIFSIGNALED(st));

  EXPECT_EQ(ReadFile(target), old_bytes) << "the target must still hold the old file";
  ASSERT_EQ(Leftovers(dir, "t.beton"), left) << "a kill in the window leaves exactly its temporary";

  // The next build of the target removes the leftover: its writer is dead, so nobody locks it.
  writer::Build(new_src, target, Quiet());
  EXPECT_TRUE(Leftovers(dir, "t.beton").empty());
  Dataset ds(target, {.verify = true});
  EXPECT_EQ(ds.size(), 50u);
}

TEST(AtomicFile, AWriterStoppedInTheWindowKeepsItsFileWhileAnotherBuildsTheSameTarget) {
  const auto a_src = SubsetTree(3), b_src = SubsetTree(1);
  const auto dir = ScratchDir();
  const std::string target = dir + "/t.beton";
  pid_t a = StartStoppedBuild(a_src, target);
  const auto a_left = Leftovers(dir, "t.beton");
  ASSERT_EQ(a_left.size(), 1u);

  writer::Build(b_src, target, Quiet());  // B runs start to finish, its clean-up included
  EXPECT_EQ(Leftovers(dir, "t.beton"), a_left) << "B removed A's locked temporary";
  EXPECT_EQ(Dataset(target, {.verify = true}).size(), 10u);

  ::kill(a, SIGCONT);
  int st = 0;
  ::waitpid(a, &st, 0);
  ASSERT_TRUE(WIFEXITED(st));
  EXPECT_EQ(WEXITSTATUS(st), 0);
  EXPECT_EQ(Dataset(target, {.verify = true}).size(), 30u) << "A renamed last: the target is A's complete file";
  EXPECT_TRUE(Leftovers(dir, "t.beton").empty());
}

TEST(AtomicFile, AReplacedFileKeepsItsPermissions) {
  // A rebuild over a private (0600) file made it 0644: readable by everyone.
  const auto dir = ScratchDir();
  const std::string target = dir + "/p.bin";
  auto write = [&](char c) {
    writer::AtomicFile f(target);
    f.WriteAt(0, &c, 1);
    f.Commit();
  };
  write('a');
  for (mode_t mode : {mode_t(0600), mode_t(0640), mode_t(0444)}) {
    ASSERT_EQ(::chmod(target.c_str(), mode), 0);
    write('b');
    struct stat st;
    ASSERT_EQ(::stat(target.c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 07777, mode);
    EXPECT_EQ(ReadFile(target), std::vector<uint8_t>{'b'});
  }
  EXPECT_TRUE(Leftovers(dir, "p.bin").empty());
}

TEST(AtomicFile, ConcurrentWritersInOneProcessEachCommitACompleteFile) {
  // Threads share a PID, so a PID-derived temporary name (and the unlink before linking it) let one
  // writer delete or rename another's file.
  const auto dir = ScratchDir();
  const std::string target = dir + "/t.bin";
  constexpr int kThreads = 4, kRounds = 40;
  std::atomic<int> failures{0};
  std::vector<std::string> errors(kThreads);
  std::vector<std::thread> ts;
  for (int t = 0; t < kThreads; ++t)
    ts.emplace_back([&, t] {
      // Each writer's file: its id repeated, of a length of its own.
      std::vector<uint8_t> data(size_t(1000 + 333 * t), uint8_t('a' + t));
      for (int r = 0; r < kRounds; ++r) {
        try {
          writer::AtomicFile f(target);
          f.WriteAt(0, data.data(), data.size());
          f.Commit();
        } catch (const std::exception& e) {
          ++failures;
          errors[size_t(t)] = e.what();
        }
      }
    });
  for (auto& t : ts) t.join();
  EXPECT_EQ(failures.load(), 0) << errors[0] << " | " << errors[1] << " | " << errors[2] << " | " << errors[3];
  const auto got = ReadFile(target);
  ASSERT_FALSE(got.empty());
  const int t = got[0] - 'a';
  ASSERT_TRUE(t >= 0 && t < kThreads);
  EXPECT_EQ(got, std::vector<uint8_t>(size_t(1000 + 333 * t), uint8_t('a' + t))) << "a mixed or partial file";
  EXPECT_TRUE(Leftovers(dir, "t.bin").empty());
}

TEST(AtomicFile, ALeftoverLockedByALiveProcessIsLeftAloneAndUnlockedOnesAreRemoved) {
  const auto dir = ScratchDir();
  const std::string target = dir + "/t.bin";
  const std::string locked = dir + "/.t.bin.dsc-tmp-0123456789abcdef";
  const std::string stale = dir + "/.t.bin.dsc-tmp-fedcba9876543210";
  const std::string other = dir + "/.u.bin.dsc-tmp-fedcba9876543210";  // another target's: not ours to judge
  WriteFile(locked, "live", 4);
  WriteFile(stale, "dead", 4);
  WriteFile(other, "else", 4);
  int ready[2], done[2];
  ASSERT_EQ(::pipe(ready), 0);
  ASSERT_EQ(::pipe(done), 0);
  pid_t holder = ::fork();
  if (holder == 0) {  // a live writer: holds the lock until told to stop
    int fd = ::open(locked.c_str(), O_RDONLY);
    char c = ::flock(fd, LOCK_EX | LOCK_NB) == 0 ? 'y' : 'n';
    (void)!::write(ready[1], &c, 1);
    (void)!::read(done[0], &c, 1);
    ::_exit(0);
  }
  char c = 0;
  ASSERT_EQ(::read(ready[0], &c, 1), 1);
  ASSERT_EQ(c, 'y');

  const std::vector<uint8_t> data(100, 7);
  {
    writer::AtomicFile f(target);
    f.WriteAt(0, data.data(), data.size());
    f.Commit();
  }
  EXPECT_EQ(ReadFile(target), data);
  EXPECT_TRUE(fs::exists(locked)) << "a locked temporary belongs to a live writer";
  EXPECT_EQ(ReadFile(locked), std::vector<uint8_t>({'l', 'i', 'v', 'e'}));
  EXPECT_FALSE(fs::exists(stale)) << "an unlocked leftover of this target is removed";
  EXPECT_TRUE(fs::exists(other));

  (void)!::write(done[1], "x", 1);
  ::waitpid(holder, nullptr, 0);
  for (int fd : {ready[0], ready[1], done[0], done[1]}) ::close(fd);
  // Its writer gone, the next writer of the target removes it too.
  {
    writer::AtomicFile f(target);
    f.WriteAt(0, data.data(), data.size());
    f.Commit();
  }
  EXPECT_FALSE(fs::exists(locked));
  EXPECT_TRUE(fs::exists(other));
}

// A symlinked output is written through: the link stays, what it points to (another folder, maybe
// another disk) gets the new file; a dangling link's target is created. The link itself used to be
// replaced by a file in the link's folder.
TEST(AtomicFile, ASymlinkedTargetIsWrittenThroughAndStaysALink) {
  const auto dir = ScratchDir();
  fs::create_directories(dir + "/real");
  fs::create_directories(dir + "/out");
  auto write = [&](const std::string& target, char c) {
    writer::AtomicFile f(target);
    f.WriteAt(0, &c, 1);
    f.Commit();
  };
  write(dir + "/real/a.bin", 'a');
  fs::create_symlink("../real/a.bin", dir + "/out/a.bin");    // relative, to an existing file
  fs::create_symlink(dir + "/out/a.bin", dir + "/out/b.bin");  // a chain of two
  fs::create_symlink("../real/new.bin", dir + "/out/new.bin");  // dangling
  write(dir + "/out/b.bin", 'b');
  write(dir + "/out/new.bin", 'n');
  EXPECT_TRUE(fs::is_symlink(dir + "/out/a.bin"));
  EXPECT_TRUE(fs::is_symlink(dir + "/out/b.bin"));
  EXPECT_TRUE(fs::is_symlink(dir + "/out/new.bin"));
  EXPECT_EQ(ReadFile(dir + "/real/a.bin"), std::vector<uint8_t>{'b'});
  EXPECT_EQ(ReadFile(dir + "/real/new.bin"), std::vector<uint8_t>{'n'});
  EXPECT_TRUE(Leftovers(dir + "/out", "a.bin").empty() && Leftovers(dir + "/real", "a.bin").empty());
  fs::create_symlink("loop", dir + "/out/loop");
  EXPECT_THROW(writer::AtomicFile(dir + "/out/loop"), Error);
}

// Without /proc (a bare chroot or container) the unnamed temporary could not be named at commit: the
// build failed at its very end ("cannot link the finished file"). Root only: /proc is hidden by a
// tmpfs mounted in a private mount namespace (unshare -m); skipped where that is not allowed.
TEST(AtomicFile, ABuildWithoutProcCommits) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "the sanitizer runtimes read /proc themselves (LeakSanitizer fails without it)";
#endif
  const auto dir = ScratchDir();
  if (RunShell("unshare -m sh -c 'mount -t tmpfs none /proc && test ! -e /proc/self' 2>&1") != 0)
    GTEST_SKIP() << "cannot hide /proc here (needs root and unshare -m)";
  std::string out;
  const std::string target = dir + "/noproc.beton";
  ASSERT_EQ(RunShell("unshare -m sh -c 'mount -t tmpfs none /proc && " + std::string(DSC_BINARY) + " build " + SubsetTree(2) + " " +
                         target + "' 2>&1",
                     &out),
            0)
      << out;
  EXPECT_EQ(Dataset(target).size(), 20u);
  EXPECT_TRUE(Leftovers(dir, "noproc.beton").empty());
}

}  // namespace
}  // namespace dsc::test
