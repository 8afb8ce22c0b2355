// Files the daemon and outboxctl write (archives and their rotations,
// migration backups, a new database) in directories that others may reach:
// never through a planted link or someone else's file, always with the
// documented mode whatever the umask.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "archive.h"
#include "common/temp_dir.h"
#include "outbox/store.h"
#include "store/old_schema.h"

namespace outbox::agent {
namespace {

namespace fs = std::filesystem;

store::Row Delivered(std::int64_t id, const std::string& payload) {
  store::Row row;
  row.id = id;
  row.topic = "orders";
  row.key = "k" + std::to_string(id);
  row.payload = payload;
  row.status = store::Status::kDelivered;
  return row;
}

std::string Read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

unsigned ModeOf(const std::string& path) {
  struct stat st {};
  EXPECT_EQ(::lstat(path.c_str(), &st), 0) << path;
  return static_cast<unsigned>(st.st_mode & 07777);
}

// Sets the process's umask for one test and puts the old one back.
class Umask {
 public:
  explicit Umask(mode_t mask) : old_(::umask(mask)) {}
  ~Umask() { ::umask(old_); }
  Umask(const Umask&) = delete;
  Umask& operator=(const Umask&) = delete;

 private:
  mode_t old_;
};

TEST(HostileFiles, TheArchiveNeverWritesThroughALinkPlantedInItsPlace) {
  outbox::testing::TempDir dir;
  const std::string victim = dir.File("victim");
  std::ofstream(victim) << "precious\n";
  const std::string path = dir.File("arch.jsonl");
  fs::create_symlink(victim, path);
  ArchiveFile archive(path, 1 << 20);
  EXPECT_THROW(archive.Append({Delivered(1, "p")}, "db1"), std::runtime_error);
  // A hard link (someone else's file by another name) is refused too.
  fs::remove(path);
  fs::create_hard_link(victim, path);
  EXPECT_THROW(archive.Append({Delivered(2, "p")}, "db1"), std::runtime_error);
  EXPECT_EQ(Read(victim), "precious\n");
}

TEST(HostileFiles, RotationNeverWritesThroughALinkPlantedAtItsTargets) {
  outbox::testing::TempDir dir;
  const std::string victim = dir.File("victim");
  std::ofstream(victim) << "precious\n";
  const std::string path = dir.File("arch.jsonl");
  ArchiveFile archive(path, 10, 2);
  archive.Append({Delivered(1, std::string(100, 'x'))}, "db1");
  fs::create_symlink(victim, path + ".rotating.gz");
  fs::create_symlink(victim, RotatedArchivePath(path, 1));
  archive.Append({Delivered(2, "p")}, "db1");  // rotates
  archive.Append({Delivered(3, "p")}, "db1");  // rotates again: .1 moves to .2
  EXPECT_EQ(Read(victim), "precious\n");
  EXPECT_TRUE(fs::is_regular_file(fs::symlink_status(RotatedArchivePath(path, 1))));
  EXPECT_TRUE(fs::is_regular_file(fs::symlink_status(RotatedArchivePath(path, 2))));
}

TEST(HostileFiles, ArchivesAndTheirRotationsAre0640WhateverTheUmask) {
  const Umask open_umask(0);
  outbox::testing::TempDir dir;
  const std::string path = dir.File("arch.jsonl");
  ArchiveFile archive(path, 10, 2);
  archive.Append({Delivered(1, std::string(100, 'x'))}, "db1");
  archive.Append({Delivered(2, "p")}, "db1");
  EXPECT_EQ(ModeOf(path), 0640u);
  EXPECT_EQ(ModeOf(RotatedArchivePath(path, 1)), 0640u);
}

TEST(HostileFiles, ANewDatabaseIs0640Or0660InASetgidDirectoryWhateverTheUmask) {
  const Umask open_umask(0);
  outbox::testing::TempDir dir;
  store::Options options;
  options.path = dir.File("app.db");
  options.create = true;
  { store::Store created(options); }
  EXPECT_EQ(ModeOf(options.path), 0640u);
  // The shared-group layout of docs/operations.md: a setgid directory.
  const std::string shared = dir.File("shared");
  fs::create_directory(shared);
  ASSERT_EQ(::chmod(shared.c_str(), 02770), 0);
  options.path = shared + "/app.db";
  { store::Store created(options); }
  EXPECT_EQ(ModeOf(options.path), 0660u);
}

TEST(HostileFiles, ANewDatabaseIsNeverCreatedThroughADanglingLink) {
  outbox::testing::TempDir dir;
  const std::string elsewhere = dir.File("elsewhere.db");
  store::Options options;
  options.path = dir.File("app.db");
  options.create = true;
  fs::create_symlink(elsewhere, options.path);
  EXPECT_THROW(store::Store{options}, store::StoreError);
  EXPECT_FALSE(fs::exists(elsewhere));
}

TEST(HostileFiles, TheMigrationBackupKeepsOthersOutWhateverTheUmask) {
  const Umask open_umask(0);
  outbox::testing::TempDir dir;
  const std::string path = dir.File("old.db");
  store::testing::MakeFileAtVersion(path, store::kSchemaVersion - 1);
  ASSERT_EQ(::chmod(path.c_str(), 0664), 0);
  const std::string backup = path + ".bak-schema" + std::to_string(store::kSchemaVersion - 1);
  // A link planted under the temporary name is replaced, never followed.
  const std::string victim = dir.File("victim");
  std::ofstream(victim) << "precious\n";
  fs::create_symlink(victim, backup + ".tmp-" + std::to_string(::getpid()));
  store::Options options;
  options.path = path;
  { store::Store migrated(options); }
  EXPECT_EQ(ModeOf(backup), 0660u);
  EXPECT_EQ(Read(victim), "precious\n");
}

}  // namespace
}  // namespace outbox::agent
