#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>

#include "outbox/transport.h"

namespace outbox::transport {
namespace {

std::string ErrorOf(std::string_view value, std::string_view field) {
  try {
    ResolveSecret(value, field);
  } catch (const std::invalid_argument& error) {
    return error.what();
  }
  return "";
}

class ResolveSecretTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern =
        (std::filesystem::temp_directory_path() / "outbox-secret-XXXXXX").string();
    ASSERT_NE(mkdtemp(pattern.data()), nullptr);
    directory_ = pattern;
  }
  void TearDown() override { std::filesystem::remove_all(directory_); }

  std::string WriteFile(const std::string& name, const std::string& contents) {
    const std::filesystem::path path = directory_ / name;
    std::ofstream(path, std::ios::binary) << contents;
    return path.string();
  }

  std::filesystem::path directory_;
};

TEST_F(ResolveSecretTest, ReturnsPlainValuesAsTheyAre) {
  EXPECT_EQ(ResolveSecret("Bearer abc", "headers.Authorization"), "Bearer abc");
  EXPECT_EQ(ResolveSecret("", "headers.X"), "");
}

TEST_F(ResolveSecretTest, ReadsTheEnvironment) {
  ASSERT_EQ(setenv("OUTBOX_TEST_TOKEN", "s3cret", 1), 0);
  EXPECT_EQ(ResolveSecret("env:OUTBOX_TEST_TOKEN", "f"), "s3cret");
  unsetenv("OUTBOX_TEST_TOKEN");
}

TEST_F(ResolveSecretTest, NamesTheFieldWhenTheVariableIsMissing) {
  unsetenv("OUTBOX_TEST_MISSING");
  EXPECT_EQ(ErrorOf("env:OUTBOX_TEST_MISSING", "topics.a.signing_secret"),
            "topics.a.signing_secret: environment variable OUTBOX_TEST_MISSING is not set");
  EXPECT_EQ(ErrorOf("env:", "f"), "f: \"env:\" needs a variable name");
}

TEST_F(ResolveSecretTest, RefusesAnEmptyVariable) {
  ASSERT_EQ(setenv("OUTBOX_TEST_EMPTY", "", 1), 0);
  EXPECT_EQ(ErrorOf("env:OUTBOX_TEST_EMPTY", "f"),
            "f: environment variable OUTBOX_TEST_EMPTY is empty");
  unsetenv("OUTBOX_TEST_EMPTY");
}

TEST_F(ResolveSecretTest, ReadsAFileWithoutItsTrailingNewline) {
  EXPECT_EQ(ResolveSecret("file:" + WriteFile("unix", "tok en\n"), "f"), "tok en");
  EXPECT_EQ(ResolveSecret("file:" + WriteFile("dos", "token\r\n"), "f"), "token");
  EXPECT_EQ(ResolveSecret("file:" + WriteFile("bare", "token"), "f"), "token");
}

TEST_F(ResolveSecretTest, NamesTheFieldWhenTheFileIsUnreadable) {
  const std::string missing = (directory_ / "missing").string();
  EXPECT_EQ(ErrorOf("file:" + missing, "tls.key"), "tls.key: cannot read file " + missing);
  const std::string empty = WriteFile("empty", "\n");
  EXPECT_EQ(ErrorOf("file:" + empty, "f"), "f: file " + empty + " is empty");
}

}  // namespace
}  // namespace outbox::transport
