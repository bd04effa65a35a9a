#include "domain/store_config.h"

#include <sys/stat.h>

#include <cstdio>
#include <cstdlib>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "testing/status_matchers.h"

namespace ringmaster {
namespace {

using ::testing::HasSubstr;

std::string TempFile(const std::string& name, const std::string& text, mode_t mode) {
  const std::string path = std::string(std::getenv("TEST_TMPDIR")) + "/" + name;
  std::FILE* f = std::fopen(path.c_str(), "w");
  std::fputs(text.c_str(), f);
  std::fclose(f);
  chmod(path.c_str(), mode);
  return path;
}

TEST(StoreConfigTest, TheDefaultIsSqliteInTheStateDir) {
  absl::StatusOr<StoreConfig> config = ParseStoreConfig("", "", "/var/lib/ringmaster");
  ASSERT_OK(config);
  EXPECT_EQ(config->engine, StoreConfig::kSqlite);
  EXPECT_EQ(config->sqlite_path, "/var/lib/ringmaster/coordinator.db");
  EXPECT_EQ(StoreLabel(*config), "sqlite:///var/lib/ringmaster/coordinator.db");

  config = ParseStoreConfig("sqlite:///data/rm.db", "", "/var/lib/ringmaster");
  ASSERT_OK(config);
  EXPECT_EQ(config->sqlite_path, "/data/rm.db");
  EXPECT_THAT(ParseStoreConfig("sqlite://rm.db", "", "/x").status().message(),
              HasSubstr("an absolute path"));
}

TEST(StoreConfigTest, PostgresqlTakesAUriAndItsPasswordFromAFileOnlyItsOwnerReads) {
  absl::StatusOr<StoreConfig> config = ParseStoreConfig(
      "postgresql://ringmaster@db1:5432,db2:5432/ringmaster?target_session_attrs=read-write", "",
      "/x");
  ASSERT_OK(config);
  EXPECT_EQ(config->engine, StoreConfig::kPostgres);
  EXPECT_TRUE(config->password.empty()) << "libpq's own: PGPASSFILE or ~/.pgpass";
  EXPECT_EQ(StoreLabel(*config), "postgresql://ringmaster@db1:5432,db2:5432/ringmaster");
  EXPECT_EQ(ParseStoreConfig("postgres://db/rm", "", "/x")->engine, StoreConfig::kPostgres);

  const std::string good = TempFile("good", "s3cret\n", 0600);
  config = ParseStoreConfig("postgres://ringmaster@db/ringmaster", good, "/x");
  ASSERT_OK(config);
  EXPECT_EQ(config->password, "s3cret");

  const std::string open = TempFile("open", "s3cret\n", 0644);
  EXPECT_THAT(ParseStoreConfig("postgresql://db/rm", open, "/x").status(),
              StatusIs(absl::StatusCode::kFailedPrecondition));
  const std::string empty = TempFile("empty", "\n", 0600);
  EXPECT_THAT(ParseStoreConfig("postgresql://db/rm", empty, "/x").status().message(),
              HasSubstr("is empty"));
}

TEST(StoreConfigTest, APasswordOnTheCommandLineOrAnotherSchemeIsRefused) {
  for (const char* uri : {"postgresql://ringmaster:s3cret@db/ringmaster",
                          "postgresql://db/ringmaster?sslmode=require&password=s3cret"}) {
    absl::Status refused = ParseStoreConfig(uri, "", "/x").status();
    EXPECT_THAT(refused, StatusIs(absl::StatusCode::kInvalidArgument)) << uri;
    EXPECT_THAT(refused.message(), HasSubstr("--store-password-file")) << uri;
    EXPECT_THAT(refused.message(), ::testing::Not(HasSubstr("s3cret"))) << uri;
  }
  EXPECT_OK(ParseStoreConfig("postgresql://user@db/rm?passfile=/etc/rm/pgpass", "", "/x"));
  EXPECT_THAT(ParseStoreConfig("db/rm", "", "/x").status().message(),
              HasSubstr("not a URI such as sqlite:///PATH or postgresql://HOST/DATABASE"));
  // Another scheme is another engine's: the coordinator's store factory
  // refuses one it does not have.
  absl::StatusOr<StoreConfig> other = ParseStoreConfig("Memory://jobs?x=1", "", "/x");
  ASSERT_OK(other);
  EXPECT_EQ(other->engine, "memory");
  EXPECT_EQ(StoreLabel(*other), "Memory://jobs");
  EXPECT_THAT(ParseStoreConfig("sqlite:///a.db", "/etc/pw", "/x").status().message(),
              HasSubstr("--store-password-file is for a PostgreSQL --store"));
}

}  // namespace
}  // namespace ringmaster
