// naive_relay: the baseline of figures 4b and 6, the relay a plain C
// program would be. One thread, one connection, one kept-alive libcurl
// handle: claim the oldest due row of a topic (one transaction), POST its
// payload, complete it (another transaction); poll every millisecond when
// nothing is due. No retries, no leases, no metrics. SIGTERM stops it.
//
//   naive_relay DB_FILE URL TOPIC
#include <curl/curl.h>
#include <signal.h>
#include <sqlite3.h>
#include <time.h>

#include <cstdio>
#include <cstring>
#include <string>

namespace {

volatile sig_atomic_t stop = 0;

void OnSignal(int) { stop = 1; }

std::size_t Discard(char*, std::size_t size, std::size_t count, void*) { return size * count; }

long long NowMs() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<long long>(ts.tv_sec) * 1000 + ts.tv_nsec / 1'000'000;
}

bool Step(sqlite3* db, sqlite3_stmt* statement) {
  const int rc = sqlite3_step(statement);
  if (rc != SQLITE_ROW && rc != SQLITE_DONE) {
    std::fprintf(stderr, "naive_relay: %s\n", sqlite3_errmsg(db));
  }
  return rc == SQLITE_ROW;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: naive_relay DB_FILE URL TOPIC\n");
    return 2;
  }
  signal(SIGTERM, OnSignal);
  signal(SIGINT, OnSignal);
  sqlite3* db = nullptr;
  if (sqlite3_open_v2(argv[1], &db, SQLITE_OPEN_READWRITE, nullptr) != SQLITE_OK) {
    std::fprintf(stderr, "naive_relay: cannot open %s\n", argv[1]);
    return 1;
  }
  sqlite3_busy_timeout(db, 5000);
  sqlite3_exec(db, "PRAGMA synchronous = NORMAL", nullptr, nullptr, nullptr);
  sqlite3_stmt *begin, *commit, *claim, *complete, *revert;
  sqlite3_prepare_v2(db, "BEGIN IMMEDIATE", -1, &begin, nullptr);
  sqlite3_prepare_v2(db, "COMMIT", -1, &commit, nullptr);
  sqlite3_prepare_v2(db,
                     "UPDATE outbox SET status = 3, updated_at = ?2 WHERE id ="
                     " (SELECT id FROM outbox WHERE status = 0 AND topic = ?1"
                     " AND next_attempt_at <= ?2 ORDER BY next_attempt_at, id LIMIT 1)"
                     " RETURNING id, payload",
                     -1, &claim, nullptr);
  sqlite3_prepare_v2(db, "UPDATE outbox SET status = 1, updated_at = ?2 WHERE id = ?1", -1,
                     &complete, nullptr);
  sqlite3_prepare_v2(db, "UPDATE outbox SET status = 0, updated_at = ?2 WHERE id = ?1", -1,
                     &revert, nullptr);

  curl_global_init(CURL_GLOBAL_DEFAULT);
  CURL* easy = curl_easy_init();
  curl_easy_setopt(easy, CURLOPT_URL, argv[2]);
  curl_easy_setopt(easy, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(easy, CURLOPT_TCP_NODELAY, 1L);
  curl_easy_setopt(easy, CURLOPT_POST, 1L);
  curl_easy_setopt(easy, CURLOPT_WRITEFUNCTION, &Discard);
  std::string payload;
  while (!stop) {
    const long long now = NowMs();
    sqlite3_int64 id = 0;
    Step(db, begin);
    sqlite3_reset(begin);
    sqlite3_bind_text(claim, 1, argv[3], -1, SQLITE_STATIC);
    sqlite3_bind_int64(claim, 2, now);
    if (Step(db, claim)) {
      id = sqlite3_column_int64(claim, 0);
      payload.assign(static_cast<const char*>(sqlite3_column_blob(claim, 1)),
                     static_cast<std::size_t>(sqlite3_column_bytes(claim, 1)));
      while (Step(db, claim)) {
      }
    }
    sqlite3_reset(claim);
    Step(db, commit);
    sqlite3_reset(commit);
    if (id == 0) {
      const timespec pause{0, 1'000'000};
      nanosleep(&pause, nullptr);
      continue;
    }
    curl_slist* headers = curl_slist_append(nullptr, "Content-Type: application/json");
    headers = curl_slist_append(headers, ("Idempotency-Key: " + std::to_string(id)).c_str());
    headers = curl_slist_append(headers, "Expect:");
    curl_easy_setopt(easy, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(easy, CURLOPT_POSTFIELDS, payload.data());
    curl_easy_setopt(easy, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(payload.size()));
    const CURLcode code = curl_easy_perform(easy);
    long status = 0;
    curl_easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &status);
    curl_slist_free_all(headers);
    sqlite3_stmt* finish = code == CURLE_OK && status / 100 == 2 ? complete : revert;
    Step(db, begin);
    sqlite3_reset(begin);
    sqlite3_bind_int64(finish, 1, id);
    sqlite3_bind_int64(finish, 2, NowMs());
    Step(db, finish);
    sqlite3_reset(finish);
    Step(db, commit);
    sqlite3_reset(commit);
  }
  curl_easy_cleanup(easy);
  for (sqlite3_stmt* s : {begin, commit, claim, complete, revert}) sqlite3_finalize(s);
  sqlite3_close(db);
  return 0;
}
