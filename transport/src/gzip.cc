// gzip for request bodies (EndpointOptions::compression), through zlib.
#include <zlib.h>

#include <limits>
#include <new>
#include <stdexcept>
#include <string>

#include "internal.h"

namespace outbox::transport::internal {

std::string Gzip(std::string_view data) {
  if (data.size() > std::numeric_limits<uInt>::max()) {
    throw std::invalid_argument("Gzip: input larger than 4 GiB");
  }
  z_stream stream{};
  // windowBits 15 + 16: the gzip wrapper (RFC 1952), not zlib's. Memory
  // level 8 and the default level are zlib's own defaults: about 256 KiB
  // per call, and level 6 is within a few percent of 9 for JSON.
  const int init =
      deflateInit2(&stream, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY);
  if (init == Z_MEM_ERROR) throw std::bad_alloc();
  if (init != Z_OK) throw std::runtime_error("zlib: deflateInit2 failed");
  std::string out(deflateBound(&stream, static_cast<uLong>(data.size())), '\0');
  // zlib's API is not const-correct; deflate only reads next_in.
  stream.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  stream.avail_in = static_cast<uInt>(data.size());
  stream.next_out = reinterpret_cast<Bytef*>(out.data());
  stream.avail_out = static_cast<uInt>(out.size());
  // deflateBound guarantees room for everything in one call.
  const int status = deflate(&stream, Z_FINISH);
  const uLong written = stream.total_out;
  deflateEnd(&stream);
  if (status != Z_STREAM_END) throw std::runtime_error("zlib: deflate did not finish");
  out.resize(written);
  return out;
}

}  // namespace outbox::transport::internal
