#undef main
#undef __assert_fail
#undef editforge_token
#undef editforge_assert_fail
void editforge_token();
extern "C" void editforge_assert_fail(const char *, const char *, unsigned int, const char *) noexcept
    __attribute__((__noreturn__));
// Called through a pointer of its exact type: overloads or templates of the program by that name
// are never chosen (a call by name would pick an `int` overload for the tests' `__LINE__`). glibc's
// declarations come first (they are made once), so that a later <assert.h> only defines `assert`.
#include <assert.h>
#define __assert_fail \
    (static_cast<void (*)(const char *, const char *, unsigned int, const char *) noexcept>(&::editforge_assert_fail))
