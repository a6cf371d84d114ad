#!/bin/sh
# analyze.sh - static analysis of the engine and the command (src/,
# src/kernels/, train/model/, train/cli/, train/dist/): cppcheck, then
# clang-tidy's static analyzer and bugprone checks, each file alone.
#
# Only the checks with no false positive left on this code run; the ones
# left out, and why:
#   cppcheck uninitvar            arrays filled by a loop or a callee and read
#                                 over the same range (attention.c's m,
#                                 cmd_eval.c's c, svg.c's line)
#   cppcheck invalidPointerCast   run.c reaches a field of the settings struct
#                                 by its offsetof, as the field's own type
#   clang-analyzer-core.CallAndMessage, .UndefinedBinaryOperatorResult,
#   .uninitialized.Assign, .DivideZero, .NonNullParamChecker
#                                 paths that cannot happen: the analyzer does
#                                 not follow variadic calls (safetensors.c's
#                                 fail always returns -1), forgets a struct's
#                                 field over an opaque call, or assumes a
#                                 condition and its opposite on one path
#   bugprone-integer-division     gemm.c's block sizes are rounded down to
#                                 whole micro-tiles on purpose
#   bugprone-sizeof-expression    `sizeof *list` for an array of pointers is
#                                 taken for sizeof of a pointer by mistake (its
#                                 option for that alone is newer than
#                                 clang-tidy 14)
#   bugprone-suspicious-string-compare's implicit comparison
#                                 (`if (strcmp(a, b))` for "differ") is off;
#                                 the rest of the check runs.
# Tuned with cppcheck 2.10 and clang-tidy 14: a newer one may bring checks
# of its own to the *-wildcards.  A tool that is not installed is skipped,
# saying so.  The last line is "analyze: N finding(s)" (then the exit
# status is 1) or "analyze: no findings".
# Run from the repository root; files given as arguments are analyzed
# instead of all of them.
FILES=${*:-$(ls src/*.c src/kernels/*.c train/model/*.c train/cli/*.c train/dist/*.c)}
INC="-Iinclude -Isrc -Itrain/model -Itrain/cli -Itrain/dist"
OUT=$(mktemp "${TMPDIR:-/tmp}/attograd-analyze.XXXXXX") || exit 1
trap 'rm -f "$OUT"' EXIT
findings=0
ran=0

if command -v cppcheck >/dev/null; then
    ran=$((ran + 1))
    # __GNUC__ as the compilers define it: ag_error and die are then
    # noreturn, as they are in the build
    cppcheck -q --enable=warning,portability,performance -D__GNUC__ $INC \
        --suppress=uninitvar --suppress=invalidPointerCast \
        --template='{file}:{line}:{column}: {severity}: {message} [{id}]' $FILES 2>"$OUT"
    rc=$?
    n=$(grep -c ': \(error\|warning\|portability\|performance\|style\): ' "$OUT")
    cat "$OUT"
    [ "$rc" -ne 0 ] && [ "$n" -eq 0 ] && n=1 && echo "cppcheck failed (exit status $rc)"
    echo "cppcheck: $n finding(s)"
    findings=$((findings + n))
else
    echo "cppcheck: skipped: not installed (apt-get install cppcheck)"
fi

CHECKS='-*,clang-analyzer-*,-clang-analyzer-security.insecureAPI.*'
CHECKS="$CHECKS,-clang-analyzer-core.CallAndMessage,-clang-analyzer-core.UndefinedBinaryOperatorResult"
CHECKS="$CHECKS,-clang-analyzer-core.uninitialized.Assign,-clang-analyzer-core.DivideZero"
CHECKS="$CHECKS,-clang-analyzer-core.NonNullParamChecker"
CHECKS="$CHECKS,bugprone-*,-bugprone-easily-swappable-parameters,-bugprone-narrowing-conversions"
CHECKS="$CHECKS,-bugprone-implicit-widening-of-multiplication-result,-bugprone-reserved-identifier"
CHECKS="$CHECKS,-bugprone-branch-clone,-bugprone-macro-parentheses,-bugprone-assignment-in-if-condition"
CHECKS="$CHECKS,-bugprone-integer-division,-bugprone-sizeof-expression"
CONFIG='{CheckOptions: [{key: bugprone-suspicious-string-compare.WarnOnImplicitComparison, value: false}]}'
if command -v clang-tidy >/dev/null; then
    ran=$((ran + 1))
    n=0
    for f in $FILES; do
        clang-tidy -quiet --checks="$CHECKS" --config="$CONFIG" "$f" -- -std=c11 -D_POSIX_C_SOURCE=200809L \
            $INC -march=native >"$OUT" 2>/dev/null
        rc=$?
        k=$(grep -c ': \(warning\|error\): ' "$OUT")
        [ "$k" -gt 0 ] && cat "$OUT"
        [ "$rc" -ne 0 ] && [ "$k" -eq 0 ] && k=1 && echo "$f: clang-tidy failed (exit status $rc)"
        n=$((n + k))
    done
    echo "clang-tidy: $n finding(s)"
    findings=$((findings + n))
else
    echo "clang-tidy: skipped: not installed (apt-get install clang-tidy)"
fi

if [ "$ran" -eq 0 ]; then
    echo "analyze: skipped: neither cppcheck nor clang-tidy is installed"
    exit 0
fi
if [ "$findings" -gt 0 ]; then
    echo "analyze: $findings finding(s)"
    exit 1
fi
echo "analyze: no findings"
