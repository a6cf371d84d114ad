/*
 * expect_error.h - checks that a call is refused through the engine's error
 * handler (ag_set_error_handler), for the tests of misuse.  With
 * record_error installed as the handler, EXPECT_ERROR(stmt, fragment, ...)
 * runs stmt and counts one assertion per fragment: the error must be raised
 * and its message must contain the fragment (an op's name, a shape, a
 * value); an error not raised counts as one failure.  The handler keeps the
 * last message in error_msg and jumps back out of the call through
 * error_jump (a test may set it itself around calls it expects to pass);
 * error_count counts every error raised.
 */
#ifndef ATTOGRAD_TESTS_EXPECT_ERROR_H
#define ATTOGRAD_TESTS_EXPECT_ERROR_H

#include <setjmp.h>
#include <stdio.h>
#include <string.h>

#include "check.h"

static jmp_buf error_jump;
static char error_msg[512];
static int error_count;

static void record_error(const char *msg, void *user)
{
    (void)user;
    snprintf(error_msg, sizeof error_msg, "%s", msg);
    error_count++;
    longjmp(error_jump, 1);
}

/* The error raised by `stmt` (at file:line) must contain every fragment
 * (op name, shapes). */
static void check_error(const char *file, int line, const char *stmt, int raised, const char *const *fragments)
{
    if (!raised) {
        CHECK(0, "(%s:%d) %s raised no error", file, line, stmt);
        return;
    }
    for (int i = 0; fragments[i]; i++)
        CHECK(strstr(error_msg, fragments[i]) != NULL, "(%s:%d) %s: error \"%s\" does not name \"%s\"", file, line,
              stmt, error_msg, fragments[i]);
}

#define EXPECT_ERROR(stmt, ...)                                                  \
    do {                                                                         \
        volatile int raised_ = 0;                                                \
        error_msg[0] = 0;                                                        \
        if (setjmp(error_jump) == 0) {                                           \
            stmt;                                                                \
        } else {                                                                 \
            raised_ = 1;                                                         \
        }                                                                        \
        check_error(__FILE__, __LINE__, #stmt, raised_,                          \
                    (const char *const[]){ __VA_ARGS__, NULL });                 \
    } while (0)

#endif
