// The HTTP server of outboxd's listeners (util/http_server.h) over real
// sockets on 127.0.0.1 (port 0) and a Unix socket in a temporary directory.
#include "util/http_server.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace outbox::util::http {
namespace {

// A connected client socket, closed on destruction; reads with a timeout.
class Client {
 public:
  explicit Client(int port) : fd_(::socket(AF_INET, SOCK_STREAM, 0)) {
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(static_cast<std::uint16_t>(port));
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    Connect(reinterpret_cast<sockaddr*>(&address), sizeof(address));
  }
  explicit Client(const std::string& unix_path) : fd_(::socket(AF_UNIX, SOCK_STREAM, 0)) {
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    std::strncpy(address.sun_path, unix_path.c_str(), sizeof(address.sun_path) - 1);
    Connect(reinterpret_cast<sockaddr*>(&address), sizeof(address));
  }
  ~Client() { ::close(fd_); }

  bool Send(const std::string& bytes) {
    return ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL) ==
           static_cast<ssize_t>(bytes.size());
  }
  // One response: the head, then Content-Length bytes unless `head_only`.
  // "" when the server closed (or 5 s passed) first.
  std::string Response(bool head_only = false) {
    std::string got;
    std::size_t end;
    while ((end = got.find("\r\n\r\n")) == std::string::npos) {
      if (!Read(got)) return "";
    }
    std::size_t length = 0;
    const std::size_t at = got.find("Content-Length: ");
    if (at != std::string::npos && !head_only) length = std::stoul(got.substr(at + 16));
    while (got.size() < end + 4 + length) {
      if (!Read(got)) return "";
    }
    return got;
  }
  // Whether the server closed the connection (within 5 s).
  bool Closed() {
    std::string ignored;
    while (Read(ignored)) {
    }
    return closed_;
  }

 private:
  void Connect(sockaddr* address, socklen_t length) {
    const timeval timeout{5, 0};
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
    if (::connect(fd_, address, length) != 0) throw std::runtime_error("connect failed");
  }
  bool Read(std::string& into) {
    char buffer[4096];
    const ssize_t got = ::recv(fd_, buffer, sizeof(buffer), 0);
    if (got <= 0) {
      closed_ = got == 0 || errno == ECONNRESET;
      return false;
    }
    into.append(buffer, static_cast<std::size_t>(got));
    return true;
  }
  int fd_;
  bool closed_ = false;
};

std::string Status(const std::string& response) {
  return response.substr(0, response.find("\r\n"));
}
std::string Body(const std::string& response) {
  return response.substr(response.find("\r\n\r\n") + 4);
}

std::vector<Route> TestRoutes() {
  std::vector<Route> routes;
  routes.push_back({"GET", "/hello", false, 0, [](const Request& request) {
                      return Response::Text(200, "hello " + request.query + "\n");
                    }});
  routes.push_back({"POST", "/echo", false, 64,
                    [](const Request& request) { return Response::Text(200, request.body); }});
  routes.push_back({"GET", "/api/", true, 0, [](const Request& request) {
                      Response response = Response::Text(
                          200, request.path + " " +
                                   std::string(request.Header("X-Token").value_or("none")));
                      if (request.peer)
                        response.body += " uid=" + std::to_string(request.peer->uid);
                      if (!request.remote_address.empty())
                        response.body += " from " + request.remote_address.substr(0, 10);
                      return response;
                    }});
  // A handler putting a request's text into a header, line breaks and all.
  routes.push_back({"GET", "/split", false, 0, [](const Request& request) {
                      Response response = Response::Text(200, "x");
                      response.headers.emplace_back("X-Echo",
                                                    request.query + "\r\nSet-Cookie: evil=1");
                      return response;
                    }});
  routes.push_back({"GET", "/throws", false, 0,
                    [](const Request&) -> Response { throw std::runtime_error("boom"); }});
  return routes;
}

ListenOn Loopback() {
  ListenOn where;
  where.tcp = ListenAddress{"127.0.0.1", 0};
  return where;
}

TEST(HttpServer, ServesGetAndHeadOfARouteOnOneKeptAliveConnection) {
  Server server(Loopback(), TestRoutes());
  server.Start();
  Client client(server.port());
  ASSERT_TRUE(client.Send("GET /hello?x=1 HTTP/1.1\r\nHost: a\r\n\r\n"));
  const std::string get = client.Response();
  EXPECT_EQ(Status(get), "HTTP/1.1 200 OK");
  EXPECT_EQ(Body(get), "hello x=1\n");
  ASSERT_TRUE(client.Send("HEAD /hello?x=1 HTTP/1.1\r\n\r\n"));
  const std::string head = client.Response(/*head_only=*/true);
  EXPECT_EQ(Status(head), "HTTP/1.1 200 OK");
  EXPECT_NE(head.find("Content-Length: 10\r\n"), std::string::npos) << head;
  EXPECT_EQ(Body(head), "");
  // Pipelined: both answered in order.
  ASSERT_TRUE(client.Send("GET /hello?a HTTP/1.1\r\n\r\nGET /hello?b HTTP/1.1\r\n\r\n"));
  EXPECT_EQ(Body(client.Response()), "hello a\n");
  EXPECT_EQ(Body(client.Response()), "hello b\n");
}

TEST(HttpServer, UnknownPathIs404AndAnotherMethodIs405WithAllow) {
  Server server(Loopback(), TestRoutes());
  server.Start();
  Client client(server.port());
  ASSERT_TRUE(client.Send("GET /nothing HTTP/1.1\r\n\r\n"));
  EXPECT_EQ(Status(client.Response()), "HTTP/1.1 404 Not Found");
  ASSERT_TRUE(client.Send("DELETE /hello HTTP/1.1\r\n\r\n"));
  const std::string refused = client.Response();
  EXPECT_EQ(Status(refused), "HTTP/1.1 405 Method Not Allowed");
  EXPECT_NE(refused.find("Allow: GET, HEAD\r\n"), std::string::npos) << refused;
  // Neither carried a body: the connection stays usable.
  ASSERT_TRUE(client.Send("GET /api/x/y HTTP/1.1\r\nx-token: t1\r\n\r\n"));
  EXPECT_EQ(Body(client.Response()), "/api/x/y t1 from 127.0.0.1:");
}

TEST(HttpServer, RefusesABodyUnreadWhereNoneIsServedAndCloses) {
  Server server(Loopback(), TestRoutes());
  server.Start();
  for (const std::string path : {"/hello", "/nothing"}) {
    Client client(server.port());
    // The answer comes on the head alone: the 1 GiB is never waited for.
    ASSERT_TRUE(client.Send("POST " + path + " HTTP/1.1\r\nContent-Length: 1073741824\r\n\r\n"));
    const std::string refused = client.Response();
    EXPECT_EQ(Status(refused),
              path == "/hello" ? "HTTP/1.1 405 Method Not Allowed" : "HTTP/1.1 404 Not Found");
    EXPECT_NE(refused.find("Connection: close\r\n"), std::string::npos);
    EXPECT_TRUE(client.Closed());
  }
  Client get_with_body(server.port());
  ASSERT_TRUE(get_with_body.Send("GET /hello HTTP/1.1\r\nContent-Length: 5\r\n\r\n"));
  EXPECT_EQ(Status(get_with_body.Response()), "HTTP/1.1 413 Content Too Large");
}

TEST(HttpServer, ReadsABoundedBodyOnlyForARouteThatDeclaresOne) {
  Server server(Loopback(), TestRoutes());
  server.Start();
  {
    Client client(server.port());
    ASSERT_TRUE(client.Send("POST /echo HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello"));
    EXPECT_EQ(Body(client.Response()), "hello");
    ASSERT_TRUE(
        client.Send("POST /echo HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
                    "3\r\nabc\r\n2;ext=1\r\nde\r\n0\r\n\r\n"));
    EXPECT_EQ(Body(client.Response()), "abcde");
  }
  const std::pair<std::string, std::string> refusals[] = {
      {"Content-Length: 65\r\n", "HTTP/1.1 413 Content Too Large"},
      {"Transfer-Encoding: chunked\r\n\r\n41\r\n", "HTTP/1.1 413 Content Too Large"},
      {"Content-Length: 5\r\nContent-Encoding: gzip\r\n", "HTTP/1.1 415 Unsupported Media Type"},
      {"Content-Length: 5\r\nTransfer-Encoding: chunked\r\n", "HTTP/1.1 400 Bad Request"},
      {"Content-Length: 5\r\nContent-Length: 6\r\n", "HTTP/1.1 400 Bad Request"},
      {"Transfer-Encoding: gzip\r\n", "HTTP/1.1 501 Not Implemented"},
  };
  for (const auto& [headers, status] : refusals) {
    Client client(server.port());
    const bool chunk_follows = headers.find("\r\n\r\n") != std::string::npos;
    ASSERT_TRUE(client.Send("POST /echo HTTP/1.1\r\n" + headers + (chunk_follows ? "" : "\r\n")));
    EXPECT_EQ(Status(client.Response()), status) << headers;
    EXPECT_TRUE(client.Closed()) << headers;
  }
}

TEST(HttpServer, HeadOverItsSizeOrHeaderCountIs431) {
  ServerOptions options;
  options.max_header_bytes = 1024;
  options.max_header_count = 4;
  Server server(Loopback(), TestRoutes(), options);
  server.Start();
  Client large(server.port());
  ASSERT_TRUE(large.Send("GET /hello HTTP/1.1\r\nX-Big: " + std::string(2000, 'a') + "\r\n\r\n"));
  EXPECT_EQ(Status(large.Response()), "HTTP/1.1 431 Request Header Fields Too Large");
  EXPECT_TRUE(large.Closed());
  Client many(server.port());
  std::string request = "GET /hello HTTP/1.1\r\n";
  for (int i = 0; i < 5; ++i) request += "X-" + std::to_string(i) + ": v\r\n";
  ASSERT_TRUE(many.Send(request + "\r\n"));
  EXPECT_EQ(Status(many.Response()), "HTTP/1.1 431 Request Header Fields Too Large");
  Client malformed(server.port());
  ASSERT_TRUE(malformed.Send("GET http://elsewhere/ HTTP/1.1\r\n\r\n"));
  EXPECT_EQ(Status(malformed.Response()), "HTTP/1.1 400 Bad Request");
}

TEST(HttpServer, OneDeadlineCoversTheWholeRequestHowEverItTrickles) {
  ServerOptions options;
  options.request_timeout = std::chrono::milliseconds(300);
  Server server(Loopback(), TestRoutes(), options);
  server.Start();
  Client slow(server.port());
  ASSERT_TRUE(slow.Send("GET /hello HTTP/1.1\r\n"));
  // A header line every 50 ms would keep a per-read timeout happy forever;
  // the server answers 408 and closes long before 200 lines (10 s).
  int sent = 0;
  while (sent < 200 && slow.Send("X-" + std::to_string(sent) + ": v\r\n")) {
    ++sent;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));  // the attacker's pace
  }
  EXPECT_LT(sent, 200);
}

TEST(HttpServer, AtTheCapTheLongestIdleConnectionMakesRoom) {
  ServerOptions options;
  options.max_connections = 2;
  Server server(Loopback(), TestRoutes(), options);
  server.Start();
  Client first(server.port());
  ASSERT_TRUE(first.Send("GET /hello HTTP/1.1\r\n\r\n"));
  ASSERT_FALSE(first.Response().empty());
  Client second(server.port());
  ASSERT_TRUE(second.Send("GET /hello HTTP/1.1\r\n\r\n"));
  ASSERT_FALSE(second.Response().empty());
  Client third(server.port());
  ASSERT_TRUE(third.Send("GET /hello HTTP/1.1\r\n\r\n"));
  EXPECT_EQ(Status(third.Response()), "HTTP/1.1 200 OK");
  EXPECT_TRUE(first.Closed());  // idle longest
  ASSERT_TRUE(second.Send("GET /hello HTTP/1.1\r\n\r\n"));
  EXPECT_EQ(Status(second.Response()), "HTTP/1.1 200 OK");
}

// A client descheduled between its connect and its request, while others
// open connections and send nothing: TCP connections reach the server only
// with their first bytes, so the silent ones cannot push this one out.
TEST(HttpServer, ARequestSentAfterAFloodOfSilentConnectionsIsAnswered) {
  ServerOptions options;
  options.max_connections = 2;
  Server server(Loopback(), TestRoutes(), options);
  server.Start();
  Client late(server.port());
  std::vector<std::unique_ptr<Client>> silent;
  for (int i = 0; i < 8; ++i) silent.push_back(std::make_unique<Client>(server.port()));
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // the late client's pause
  ASSERT_TRUE(late.Send("GET /hello HTTP/1.1\r\n\r\n"));
  EXPECT_EQ(Status(late.Response()), "HTTP/1.1 200 OK");
}

TEST(HttpServer, AHandlerThatThrowsOrSplitsItsResponseGets500AndTheErrorLogALine) {
  std::vector<std::string> logged;
  Server server(Loopback(), TestRoutes(), {},
                [&logged](std::string_view line) { logged.emplace_back(line); });
  server.Start();
  {
    Client client(server.port());
    ASSERT_TRUE(client.Send("GET /throws HTTP/1.1\r\n\r\n"));
    EXPECT_EQ(Status(client.Response()), "HTTP/1.1 500 Internal Server Error");
  }
  {
    Client client(server.port());
    ASSERT_TRUE(client.Send("GET /split?a HTTP/1.1\r\n\r\n"));
    const std::string answer = client.Response();
    EXPECT_EQ(Status(answer), "HTTP/1.1 500 Internal Server Error");
    EXPECT_EQ(answer.find("evil"), std::string::npos) << answer;
  }
  server.Stop();  // joins: `logged` is ours again
  ASSERT_EQ(logged.size(), 2u);
  EXPECT_NE(logged[0].find("/throws failed: boom"), std::string::npos) << logged[0];
  EXPECT_NE(logged[1].find("malformed status or header"), std::string::npos) << logged[1];
}

class HttpServerUnix : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/http-server-test-XXXXXX";
    ASSERT_NE(::mkdtemp(pattern), nullptr);
    dir_ = pattern;
    path_ = dir_ + "/admin.sock";
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  ListenOn At(mode_t mode) const {
    ListenOn where;
    where.unix_path = path_;
    where.unix_mode = mode;
    return where;
  }
  std::string dir_;
  std::string path_;
};

TEST_F(HttpServerUnix, GivesThePeersUidAndTheSocketTheModeAsked) {
  {
    Server server(At(0600), TestRoutes());
    server.Start();
    struct stat info {};
    ASSERT_EQ(::lstat(path_.c_str(), &info), 0);
    EXPECT_TRUE(S_ISSOCK(info.st_mode));
    EXPECT_EQ(info.st_mode & 0777, 0600u);
    Client client(path_);
    ASSERT_TRUE(client.Send("GET /api/who HTTP/1.1\r\n\r\n"));
    EXPECT_EQ(Body(client.Response()), "/api/who none uid=" + std::to_string(::getuid()));
  }
  EXPECT_FALSE(std::filesystem::exists(std::filesystem::symlink_status(path_)));
}

TEST_F(HttpServerUnix, NeverReplacesAFileOrFollowsALinkButReplacesADeadSocket) {
  const std::string target = dir_ + "/target";
  std::ofstream(target) << "keep";
  std::filesystem::create_symlink(target, path_);
  EXPECT_THROW(Server(At(0600), TestRoutes()), std::runtime_error);
  std::filesystem::remove(path_);
  std::filesystem::copy_file(target, path_);
  try {
    Server server(At(0600), TestRoutes());
    ADD_FAILURE() << "a regular file was replaced";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("exists and is not a socket"), std::string::npos);
  }
  EXPECT_EQ(std::ifstream(target).rdbuf()->sgetc(), 'k');
  std::filesystem::remove(path_);
  {
    // A socket nobody answers on: bound, never listening.
    const int dead = ::socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    std::strncpy(address.sun_path, path_.c_str(), sizeof(address.sun_path) - 1);
    ASSERT_EQ(::bind(dead, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
    ::close(dead);
  }
  Server server(At(0660), TestRoutes());
  server.Start();
  Client client(path_);
  ASSERT_TRUE(client.Send("GET /hello HTTP/1.1\r\n\r\n"));
  EXPECT_EQ(Status(client.Response()), "HTTP/1.1 200 OK");
  // A second server on the live socket is refused.
  EXPECT_THROW(Server(At(0660), TestRoutes()), std::runtime_error);
}

TEST(HttpServer, BadOptionsAndRoutesAreRefusedNamingTheField) {
  ServerOptions options;
  options.max_connections = 0;
  EXPECT_THROW(Server(Loopback(), TestRoutes(), options), std::invalid_argument);
  std::vector<Route> routes{
      {"GET", "no-slash", false, 0, [](const Request&) { return Response{}; }}};
  EXPECT_THROW(Server(Loopback(), routes), std::invalid_argument);
  EXPECT_THROW(Server(ListenOn{}, TestRoutes()), std::invalid_argument);
}

}  // namespace
}  // namespace outbox::util::http
