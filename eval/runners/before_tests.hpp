#undef main
#undef __assert_fail
#undef editforge_token
#undef editforge_assert_fail
void editforge_token();
extern "C" void editforge_assert_fail(const char *, const char *, unsigned int, const char *) noexcept
    __attribute__((__noreturn__));
#define __assert_fail editforge_assert_fail
