// s3:// locations, the AWS settings an S3 transport resolves (options,
// then environment, then the shared files), the URLs it builds, and the
// XML it reads from S3's answers.

#include "artifact/s3_config.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>

#include "artifact/s3_xml.h"
#include "test_dir.h"

namespace kvfold::artifact {
namespace {

TEST(S3LocationTest, BucketAndPrefixAreParsedAndChecked) {
  auto l = ParseS3Location("s3://my-bucket/a/b/");
  ASSERT_TRUE(l.ok()) << l.status().ToString();
  EXPECT_EQ(l->bucket, "my-bucket");
  EXPECT_EQ(l->prefix, "a/b/");
  EXPECT_EQ(ParseS3Location("s3://my-bucket")->prefix, "");
  EXPECT_EQ(ParseS3Location("s3://my-bucket/")->prefix, "");
  for (const char* bad : {"s3://", "s3://ab", "s3://Upper", "s3://under_score", "s3://-lead",
                          "s3://ok-bucket/../up", "s3://ok-bucket/a//b", "s3:/x", "dir:x"}) {
    auto p = ParseS3Location(bad);
    EXPECT_TRUE(p.status().IsInvalidArgument()) << bad << ": " << p.status().ToString();
  }
  EXPECT_TRUE(ValidateLocation("s3://ok-bucket/p").ok());
  EXPECT_NE(ValidateLocation("s3://Bad").message().find("may hold only"), std::string::npos);
  EXPECT_NE(ValidateLocation("tape:x").message().find("s3://<bucket>/<prefix>"), std::string::npos);
}

class S3ConfigTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* v : kVars) {
      if (const char* old = std::getenv(v)) saved_.emplace_back(v, old);
      unsetenv(v);
    }
    setenv("HOME", dir_.path().c_str(), 1);
  }
  void TearDown() override {
    for (const char* v : kVars) unsetenv(v);
    for (const auto& [name, value] : saved_) setenv(name.c_str(), value.c_str(), 1);
  }
  void Keys() {
    setenv("AWS_ACCESS_KEY_ID", "AKID", 1);
    setenv("AWS_SECRET_ACCESS_KEY", "SECRET", 1);
  }

  static constexpr const char* kVars[] = {"AWS_ACCESS_KEY_ID",
                                          "AWS_SECRET_ACCESS_KEY",
                                          "AWS_SESSION_TOKEN",
                                          "AWS_PROFILE",
                                          "AWS_REGION",
                                          "AWS_DEFAULT_REGION",
                                          "AWS_ENDPOINT_URL",
                                          "AWS_ENDPOINT_URL_S3",
                                          "AWS_CONFIG_FILE",
                                          "AWS_SHARED_CREDENTIALS_FILE",
                                          "HOME"};
  std::vector<std::pair<std::string, std::string>> saved_;
  TestDir dir_;
};

TEST_F(S3ConfigTest, OnAwsTheRegionNamesTheEndpointAndAddressingIsVirtualHosted) {
  Keys();
  setenv("AWS_DEFAULT_REGION", "eu-west-1", 1);
  auto c = ResolveS3Config("s3://arts/p", S3Options{});
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->region, "eu-west-1");
  EXPECT_EQ(c->endpoint, "https://s3.eu-west-1.amazonaws.com");
  EXPECT_FALSE(c->path_style);
  EXPECT_EQ(S3Url(*c, "p/LATEST"), "https://arts.s3.eu-west-1.amazonaws.com/p/LATEST");
  EXPECT_EQ(S3Url(*c, "", "list-type=2"), "https://arts.s3.eu-west-1.amazonaws.com/?list-type=2");
  setenv("AWS_REGION", "us-west-2", 1);  // AWS_REGION wins over AWS_DEFAULT_REGION
  EXPECT_EQ(ResolveS3Config("s3://arts", S3Options{})->region, "us-west-2");
  // A dotted bucket would break the wildcard certificate: path-style.
  EXPECT_TRUE(ResolveS3Config("s3://my.arts", S3Options{})->path_style);
}

TEST_F(S3ConfigTest, AnOverriddenEndpointIsPathStyleUnlessToldOtherwise) {
  Keys();
  setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9000/", 1);
  auto c = ResolveS3Config("s3://arts", S3Options{});
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->endpoint, "http://127.0.0.1:9000");
  EXPECT_EQ(c->region, "us-east-1");
  EXPECT_EQ(S3Url(*c, "k"), "http://127.0.0.1:9000/arts/k");
  setenv("AWS_ENDPOINT_URL_S3", "http://minio.internal:9000", 1);  // the S3-specific one wins
  S3Options virtual_hosted;
  virtual_hosted.addressing = S3Options::Addressing::kVirtualHosted;
  c = ResolveS3Config("s3://arts", virtual_hosted);
  EXPECT_EQ(S3Url(*c, "k"), "http://arts.minio.internal:9000/k");
  S3Options flag;
  flag.endpoint = "https://r2.example.invalid";  // an option wins over both variables
  EXPECT_EQ(ResolveS3Config("s3://arts", flag)->endpoint, "https://r2.example.invalid");
  flag.endpoint = "ftp://x";
  EXPECT_TRUE(ResolveS3Config("s3://arts", flag).status().IsInvalidArgument());
  flag.endpoint = "http://host/path";
  EXPECT_TRUE(ResolveS3Config("s3://arts", flag).status().IsInvalidArgument());
  S3Options small;
  small.part_size = 1 << 20;
  EXPECT_NE(ResolveS3Config("s3://arts", small).status().message().find("5 MiB"),
            std::string::npos);
  EXPECT_EQ(*ParseS3Addressing("virtual"), S3Options::Addressing::kVirtualHosted);
  EXPECT_TRUE(ParseS3Addressing("sideways").status().IsInvalidArgument());
}

TEST_F(S3ConfigTest, CredentialsComeFromTheEnvironmentThenTheProfile) {
  std::ofstream(dir_.path() + "/credentials")
      << "[default]\naws_access_key_id = DEF\naws_secret_access_key = DEFSECRET\n"
         "[ci]\n aws_access_key_id=CI \naws_secret_access_key=CISECRET\naws_session_token=TOK\n";
  std::ofstream(dir_.path() + "/config") << "[profile ci]\nregion = ap-south-1\n";
  setenv("AWS_SHARED_CREDENTIALS_FILE", (dir_.path() + "/credentials").c_str(), 1);
  setenv("AWS_CONFIG_FILE", (dir_.path() + "/config").c_str(), 1);
  auto c = ResolveS3Config("s3://arts", S3Options{});
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->access_key, "DEF");
  EXPECT_EQ(c->region, "us-east-1");  // [default] of the config file has none
  setenv("AWS_PROFILE", "ci", 1);
  c = ResolveS3Config("s3://arts", S3Options{});
  EXPECT_EQ(c->access_key, "CI");
  EXPECT_EQ(c->secret_key, "CISECRET");
  EXPECT_EQ(c->session_token, "TOK");
  EXPECT_EQ(c->region, "ap-south-1");
  Keys();  // the variables win over a profile named by AWS_PROFILE ...
  EXPECT_EQ(ResolveS3Config("s3://arts", S3Options{})->access_key, "AKID");
  S3Options named;
  named.profile = "default";  // ... but not over one named by the caller
  EXPECT_EQ(ResolveS3Config("s3://arts", named)->access_key, "DEF");
  named.profile = "nobody";  // with keys in the environment: still refused
  auto none = ResolveS3Config("s3://arts", named);
  EXPECT_TRUE(none.status().IsFailedPrecondition()) << none.status().ToString();
  EXPECT_NE(none.status().message().find("profile \"nobody\""), std::string::npos)
      << none.status().ToString();
}

TEST(S3XmlTest, LeafTextsAreReadAndUnescaped) {
  const std::string list =
      "<?xml version=\"1.0\"?><ListBucketResult><IsTruncated>true</IsTruncated>"
      "<Contents><Key>a/x&amp;y</Key></Contents><Contents><Key>a/&#x7A;&#65;</Key></Contents>"
      "<NextContinuationToken>t+/=</NextContinuationToken></ListBucketResult>";
  EXPECT_EQ(XmlTexts(list, "Key"), (std::vector<std::string>{"a/x&y", "a/zA"}));
  EXPECT_EQ(XmlText(list, "IsTruncated"), "true");
  EXPECT_EQ(XmlText(list, "NextContinuationToken"), "t+/=");
  EXPECT_FALSE(XmlText(list, "Code").has_value());
  EXPECT_EQ(XmlUnescape("&lt;&gt;&quot;&apos;&#233;&bogus;"), "<>\"'\xC3\xA9&bogus;");
  EXPECT_EQ(XmlEscape("\"a\"<&>"), "\"a\"&lt;&amp;&gt;");
  EXPECT_TRUE(XmlTexts("<Key>unterminated", "Key").empty());
}

}  // namespace
}  // namespace kvfold::artifact
