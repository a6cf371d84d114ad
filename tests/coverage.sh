#!/bin/sh
# coverage.sh DIR: the line and branch coverage a --coverage build in DIR
# recorded (make coverage builds it and runs the tests), per file of src/,
# src/kernels/, train/model/ and train/cli/ and per folder, from gcov alone
# (gcc's, -b: "taken" counts a branch followed at least once).  Run from the
# repository root.  The files gcov writes go to a temporary directory.
[ -d "$1/src" ] || { echo "coverage.sh: no build in '$1' (make coverage makes one)"; exit 2; }
dir=$(cd "$1" && pwd)
root=$(pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/attograd-cov.XXXXXX") || exit 2
trap 'rm -rf "$work"' EXIT
for folder in src src/kernels train/model train/cli; do
    for f in "$folder"/*.c; do
        [ -e "$dir/${f%.c}.gcda" ] || [ -e "$dir/${f%.c}.gcno" ] || continue
        (cd "$work" && gcov -n -b -o "$dir/$folder" "$root/$f" 2>/dev/null) |
            awk -v want="$f" -v folder="$folder" '
                /^File / { name = $2; gsub(/\047/, "", name); sub(".*/" folder "/", folder "/", name); keep = name == want }
                keep && /^Lines executed:/ { split($0, a, /[:% ]+/); lp = a[3]; ln = a[5] }
                keep && /^Taken at least once:/ { split($0, a, /[:% ]+/); bp = a[5]; bn = a[7] }
                keep && /^No branches/ { bp = 0; bn = 0 }
                END { if (ln != "") printf "%s %s %d %d %d %d\n", want, folder, int(lp * ln / 100 + 0.5), ln,
                                           int(bp * bn / 100 + 0.5), bn }'
    done
done | awk '
    { printf "%-32s lines %5d/%-5d %5.1f%%   branches %5d/%-5d %5.1f%%\n", $1, $3, $4, $4 ? 100 * $3 / $4 : 0,
             $5, $6, $6 ? 100 * $5 / $6 : 0
      L[$2] += $3; Ln[$2] += $4; B[$2] += $5; Bn[$2] += $6; order[$2] = ++k[$2] == 1 ? ++n : order[$2]; name[order[$2]] = $2 }
    END { print ""
          for (i = 1; i <= n; i++) { f = name[i]; tl += L[f]; tln += Ln[f]; tb += B[f]; tbn += Bn[f]
              printf "%-32s lines %5d/%-5d %5.1f%%   branches %5d/%-5d %5.1f%%\n", f "/", L[f], Ln[f], 100 * L[f] / Ln[f],
                     B[f], Bn[f], Bn[f] ? 100 * B[f] / Bn[f] : 0 }
          printf "%-32s lines %5d/%-5d %5.1f%%   branches %5d/%-5d %5.1f%%\n", "total", tl, tln, 100 * tl / tln, tb, tbn,
                 tbn ? 100 * tb / tbn : 0 }'
