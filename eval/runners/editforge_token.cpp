// Compiled apart from the program: the run token's copy from descriptor 3 to 4, called at the end of
// the tests' main, and where a failed assertion of the tests goes. A program cannot redefine either (a
// second definition does not link), and no header here changes how the tests' calls resolve.
#include <unistd.h>

#include <cstdio>

void editforge_token() {
    char token[64];
    ssize_t n = read(3, token, sizeof token);
    if (n > 0 && write(4, token, (size_t)n) != n) {
        _exit(1);
    }
}

extern "C" [[noreturn]] void editforge_assert_fail(const char *expression, const char *file, unsigned int line,
                                                  const char *function) noexcept {
    std::fprintf(stderr, "%s:%u: %s: Assertion `%s' failed.\n", file, line, function, expression);
    std::fflush(stderr);
    _exit(134);
    __builtin_trap();  // only if a program's own _exit returned
}
