/*
 * msg.h - the engine's messages as one printable line (ag_error's, and
 * ag_set_err's into a caller's buffer), whatever a name, a path or a
 * file's bytes put in them.  Inline, so that programs linking part of the
 * engine (the fuzz harnesses link fileio.c alone) need nothing more.
 */
#ifndef AG_MSG_H
#define AG_MSG_H

#include <stddef.h>

/* Whether byte c is shown as \xNN: a control byte other than the newline,
 * carriage return and tab, or DEL. */
static inline int ag_msg_escaped(unsigned char c)
{
    return (c < 0x20 && c != '\n' && c != '\r' && c != '\t') || c == 0x7F;
}

/* The message s, NUL-terminated in a buffer of cap bytes, made one line of
 * printable text in place: a newline or carriage return becomes a space, a
 * tab stays, any other byte below 0x20 and DEL become the four characters
 * \xNN (lowercase hex), as the command line shows them (train/cli/args.c),
 * so that a message passed on by it is shown as it is, not escaped twice.
 * Bytes from 0x80 up (UTF-8) are left alone.  What no longer fits in cap
 * is cut, never an escape in part. */
static inline void ag_msg_one_line(char *s, size_t cap)
{
    static const char hex[] = "0123456789abcdef";
    if (!s || cap == 0)
        return;
    size_t in = 0, out = 0;
    for (; s[in]; in++) {          /* how much of s fits once escaped */
        size_t w = ag_msg_escaped((unsigned char)s[in]) ? 4 : 1;
        if (out + w > cap - 1)
            break;
        out += w;
    }
    s[out] = '\0';
    while (in > 0) {               /* from the end: out >= in, nothing unread is overwritten */
        unsigned char c = (unsigned char)s[--in];
        if (ag_msg_escaped(c)) {
            out -= 4;
            s[out] = '\\';
            s[out + 1] = 'x';
            s[out + 2] = hex[c >> 4];
            s[out + 3] = hex[c & 15];
        } else {
            s[--out] = c == '\n' || c == '\r' ? ' ' : (char)c;
        }
    }
}

#endif
