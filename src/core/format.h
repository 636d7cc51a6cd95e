// Text for messages and help: untrusted bytes made into one readable,
// bounded piece of a line, and doubles in their shortest exact form.
#pragma once
#include <cstddef>
#include <string>
#include <string_view>

namespace ada {

// Text read from a file (a name in `latest`, a tensor name, a JSON key, a
// byte the parser stopped at), ready to be put in an error message: in single
// quotes, every byte outside printable ASCII escaped (\n \r \t \0, else \xHH;
// a quote or backslash gets a backslash), so that no NUL cuts the message, no
// newline splits it and no control sequence reaches the terminal; and when it
// is longer than max_bytes, cut there and followed by its full length:
//   quote_untrusted("ckpt_1\0x")        -> 'ckpt_1\0x'
//   quote_untrusted(std::string(5000, 'a')) -> 'aaa...a'... (5000 bytes)
std::string quote_untrusted(std::string_view text, size_t max_bytes = 64);

// The shortest decimal (%.Ng, N = 1..17) that reads back as exactly x:
// 0.1 -> "0.1" (not 0.10000000000000001), 1e-3 -> "0.001", 3e-4 -> "0.0003".
std::string shortest_double(double x);

}  // namespace ada
