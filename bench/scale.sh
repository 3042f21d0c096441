# bench/run --scale: how cost grows with the number of keys. Sourced by
# bench/run after its server is up; uses its timed, median, figure and
# ratio. For each size N (ascending): the wire (raw receive) and kvfold's
# catch-up into a new durable fold, then export and seed of that fold;
# then Fold::Get latency on the largest fold while it catches up a backlog
# of N/10 updates, and resume with 100 new updates on it against a 10k fold.
# Writes bench/REPORT-scale.md (or --report's path) with a chart beside it
# (REPORT-scale.svg).

read -r -a sizes <<<"$scale_sizes"
report=${report_path:-bench/REPORT-scale.md}
chart=${report%.md}.svg
# nats-server 2.9 takes 8-14 s to create a consumer on a 10M-message
# stream, past the 5 s default of every request.
mirror+=(--request-timeout 60s)
[ "${#sizes[@]}" -ge 2 ] || { echo "bench/run: --scale needs at least two sizes" >&2; exit 2; }
for ((i = 1; i < ${#sizes[@]}; i++)); do
  [ "${sizes[i]}" -gt "${sizes[i - 1]}" ] || { echo "bench/run: --sizes must ascend" >&2; exit 2; }
done

for n in "${sizes[@]}"; do
  log "scale: loading $n keys into bucket s$n"
  "$tool" load --server "$url" --bucket "s$n" --keys "$n" >/dev/null
  for r in $(seq 1 "$runs"); do
    log "scale: $n keys, run $r of $runs"
    timed "raw-$n" "$tool" raw --server "$url" --bucket "s$n"
    rm -rf "$work/fold-$n"
    timed "catchup-$n" "${mirror[@]}" --bucket "s$n" --fold "$work/fold-$n"
  done
  du -sk "$work/fold-$n" | awk -v n="$n" '{ print n, $1 }' >>"$work/disk"
  for r in $(seq 1 "$runs"); do
    rm -rf "$work/art-$n" "$work/seed-$n"
    timed "export-$n" "$kvfold" export --fold "$work/fold-$n" --to "dir:$work/art-$n"
    timed "seed-$n" "$kvfold" seed --fold "$work/seed-$n" --from "dir:$work/art-$n"
  done
  rm -rf "$work/art-$n" "$work/seed-$n"
done

last=${sizes[-1]} prev=${sizes[-2]}
# With --profile: one more first sync at each of the two largest sizes
# under heaptrack, and what its heap held at the peak, by owner
# (bench/heap_stages), before the largest bucket takes more messages.
: >"$work/heaped"
if [ "$profile" = 1 ]; then
  for n in "$prev" "$last"; do
    log "scale: the first sync of $n keys under heaptrack"
    rm -rf "$work/fold-heap" "$work/heap-$n".*
    sync
    heaptrack -o "$work/heap-$n" "${mirror[@]}" --bucket "s$n" --fold "$work/fold-heap" \
      >"$work/out" 2>"$work/err" ||
      { echo "bench/run: the first sync of $n keys under heaptrack failed:" >&2; cat "$work/err" >&2; exit 1; }
    heaptrack_print -f "$work/heap-$n".* --flamegraph-cost-type peak -F "$work/stacks-$n" \
      >"$work/heap-summary-$n"
    bench/heap_stages <"$work/stacks-$n" >"$work/heap-stages-$n"
    peak=$(sed -n 's/^peak heap memory consumption: *//p' "$work/heap-summary-$n")
    echo "$n ${peak:-?}" >>"$work/heaped"
    rm -rf "$work/fold-heap" "$work/heap-$n".* "$work/stacks-$n"
  done
fi

backlog=$((last / 10))
log "scale: Fold::Get latency on the $last-key fold while it catches up $backlog updates"
"$tool" load --server "$url" --bucket "s$last" --keys "$backlog" >/dev/null
"$tool" getlat --server "$url" --bucket "s$last" --fold "$work/fold-$last" --keys "$last" \
  >"$work/getlat"
log "scale: resume on the $last-key fold against a 10000-key one"
"$tool" load --server "$url" --bucket s_resume --keys 10000 >/dev/null
"${mirror[@]}" --bucket s_resume --fold "$work/fold-resume" >/dev/null
for r in $(seq 1 "$runs"); do
  "$tool" load --server "$url" --bucket "s$last" --keys 100 --first $((r * 100)) >/dev/null
  "$tool" load --server "$url" --bucket s_resume --keys 100 --first $((r * 100)) >/dev/null
  timed "resume-$last" "${mirror[@]}" --bucket "s$last" --fold "$work/fold-$last"
  timed resume-10000 "${mirror[@]}" --bucket s_resume --fold "$work/fold-resume"
done

# Linear cost: N times the keys may cost at most 1.05 N times the time.
linear=$(awk -v a="$last" -v b="$prev" 'BEGIN { printf "%.2f", 1.05 * a / b }')
for n in "${sizes[@]}"; do
  figure "first_sync_vs_wire_$n" "$(ratio "$(median "raw-$n")" "$(median "catchup-$n")")" 0.9 ge \
    "raw receive $(median "raw-$n")s ÷ kvfold first sync $(median "catchup-$n")s ($n new keys)"
done
for n in "${sizes[@]}"; do cpu_bound "first_sync_$n" "raw-$n" "catchup-$n" >/dev/null; done
for what in catchup export seed; do
  figure "${what}_time_${last}_vs_${prev}" \
    "$(ratio "$(median "$what-$last")" "$(median "$what-$prev")")" "$linear" le \
    "$what of $last keys $(median "$what-$last")s ÷ of $prev keys $(median "$what-$prev")s"
  figure "${what}_rss_${last}_vs_${prev}" \
    "$(ratio "$(median "$what-$last" 3)" "$(median "$what-$prev" 3)")" 1.3 le \
    "peak RSS of $what at $last keys $(median "$what-$last" 3) KB ÷ at $prev keys $(median "$what-$prev" 3) KB"
done
figure "resume_${last}_vs_10000" "$(ratio "$(median "resume-$last")" "$(median resume-10000)")" 1.2 le \
  "resume with 100 new updates: $last-key fold $(median "resume-$last")s ÷ 10000-key fold $(median resume-10000)s"

# One row per size: medians, CPU per 1M messages (user + system).
cpu_per_m() { awk -v u="$(median "$1" 4)" -v s="$(median "$1" 5)" -v n="$2" 'BEGIN { printf "%.2f", (u + s) * 1000000 / n }'; }
: >"$work/rows"
for n in "${sizes[@]}"; do
  echo "$n $(median "raw-$n") $(median "catchup-$n") $(cpu_per_m "raw-$n" "$n") $(cpu_per_m "catchup-$n" "$n") $(median "raw-$n" 3) $(median "catchup-$n" 3) $(awk -v n="$n" '$1 == n { print $2 }' "$work/disk") $(median "export-$n") $(median "seed-$n") $(median "seed-$n" 3)" >>"$work/rows"
done

# The chart: time and peak RSS against N, both axes logarithmic, as SVG
# drawn here (no plotting package needed).
awk -v title="kvfold catch-up against N ($server_version)" '
  function lx(v) { return 70 + (log(v) - lnmin) / (lnmax - lnmin) * 300 }
  function ly(v, lo, hi) { return 330 - (log(v) - log(lo)) / (log(hi) - log(lo)) * 260 }
  { n[NR] = $1; raw[NR] = $2; kv[NR] = $3; rssr[NR] = $6 / 1024; rssk[NR] = $7 / 1024 }
  END {
    lnmin = log(n[1]) - 0.2; lnmax = log(n[NR]) + 0.2
    tlo = raw[1]; thi = kv[1]; mlo = rssr[1]; mhi = rssk[1]
    for (i = 1; i <= NR; i++) {
      if (raw[i] < tlo) tlo = raw[i]; if (kv[i] > thi) thi = kv[i]
      if (rssr[i] < mlo) mlo = rssr[i]; if (rssk[i] > mhi) mhi = rssk[i]
    }
    tlo /= 1.5; thi *= 1.5; mlo /= 1.5; mhi *= 1.5
    printf "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"820\" height=\"380\" font-family=\"sans-serif\" font-size=\"11\">\n"
    printf "<text x=\"410\" y=\"18\" text-anchor=\"middle\" font-size=\"13\">%s</text>\n", title
    for (p = 0; p < 2; p++) {
      ox = p * 410
      printf "<g transform=\"translate(%d,0)\">\n", ox
      printf "<line x1=\"70\" y1=\"330\" x2=\"370\" y2=\"330\" stroke=\"black\"/><line x1=\"70\" y1=\"70\" x2=\"70\" y2=\"330\" stroke=\"black\"/>\n"
      printf "<text x=\"220\" y=\"365\" text-anchor=\"middle\">keys (log)</text>\n"
      printf "<text x=\"220\" y=\"50\" text-anchor=\"middle\" font-size=\"12\">%s</text>\n", p ? "peak RSS, MB (log)" : "seconds (log)"
      for (i = 1; i <= NR; i++) printf "<text x=\"%.1f\" y=\"345\" text-anchor=\"middle\">%d</text>\n", lx(n[i]), n[i]
      lo = p ? mlo : tlo; hi = p ? mhi : thi
      for (s = 0; s < 2; s++) {
        color = s ? "#c0392b" : "#2c7fb8"; path = ""
        for (i = 1; i <= NR; i++) {
          v = p ? (s ? rssk[i] : rssr[i]) : (s ? kv[i] : raw[i])
          path = path sprintf("%s%.1f,%.1f", i > 1 ? " L" : "M", lx(n[i]), ly(v, lo, hi))
          printf "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3\" fill=\"%s\"/>\n", lx(n[i]), ly(v, lo, hi), color
          printf "<text x=\"%.1f\" y=\"%.1f\" fill=\"%s\">%.3g</text>\n", lx(n[i]) + 5, ly(v, lo, hi) - 5, color, v
        }
        printf "<path d=\"%s\" fill=\"none\" stroke=\"%s\" stroke-width=\"2\"/>\n", path, color
      }
      printf "<text x=\"80\" y=\"85\" fill=\"#c0392b\">kvfold catch-up</text><text x=\"80\" y=\"100\" fill=\"#2c7fb8\">raw nats.c receive</text>\n"
      printf "</g>\n"
    }
    printf "</svg>\n"
  }' "$work/rows" >"$chart"

{
  echo "# kvfold at scale"
  echo
  echo "Made by \`bench/run --scale\` on $(date -u +%Y-%m-%d), $(nproc) cores, $server_version on loopback,"
  echo "$runs runs per timing (medians), 100-byte values, history 1. Linear cost allows ${linear}×"
  echo "the time for ${last}÷${prev} the keys."
  echo
  echo "| figure | ratio | target | verdict | what was timed |"
  echo "|---|---|---|---|---|"
  awk -F'|' '{ printf "| %s | %s | %s | %s | %s |\n", $1, $2, $3, $4, $5 }' "$work/figures"
  echo
  echo "| keys | raw receive s | kvfold catch-up s | kvfold ÷ wire | CPU s per 1M msgs, raw | CPU s per 1M msgs, kvfold | peak RSS raw KB | peak RSS kvfold KB | fold on disk KB | export s | seed s | seed peak RSS KB |"
  echo "|---|---|---|---|---|---|---|---|---|---|---|---|"
  awk '{ printf "| %s | %s | %s | %.2f | %s | %s | %s | %s | %s | %s | %s | %s |\n", $1, $2, $3, ($3 > 0 ? $2 / $3 : 0), $4, $5, $6, $7, $8, $9, $10, $11 }' "$work/rows"
  echo
  echo "Fold::Get on the $last-key fold in a new process while a catch-up of $backlog updates writes"
  echo "into it (100k random keys; cold: the first pass, warm: the same keys again):"
  echo
  echo "    $(cat "$work/getlat")"
  echo
  echo "![time and peak RSS against N]($(basename "$chart"))"
  echo
  echo "What bounds the first sync against the wire on this machine (the server's CPU is read from /proc):"
  echo
  sed 's/^/- /' "$work/bounds"
  echo
  if [ -s "$work/heaped" ]; then
    echo "## What the first sync's heap holds at its peak (\`--profile\`)"
    echo
    echo "One more first sync at each of the two largest sizes under \`heaptrack\`: the call stacks that"
    echo "held memory at the heap's peak, grouped by owner by \`bench/heap_stages\` (heaptrack's own"
    echo "memory is not in them; the peak RSS above also holds the program, its threads' stacks and"
    echo "what the allocator keeps)."
    while read -r n peak; do
      echo
      echo "$n keys (peak heap $peak):"
      echo
      echo "| owner | MB | share |"
      echo "|---|---|---|"
      cat "$work/heap-stages-$n"
    done <"$work/heaped"
    echo
  fi
  echo "## Every timing (seconds, peak RSS KB, user and system CPU seconds)"
  echo
  echo "| timing | runs (s) | median (s) | median peak RSS (KB) | median user (s) | median sys (s) |"
  echo "|---|---|---|---|---|---|"
  for t in $(awk '{ print $1 }' "$work/times" | awk '!seen[$0]++'); do
    echo "| $t | $(awk -v n="$t" '$1 == n { printf "%s ", $2 }' "$work/times")| $(median "$t") | $(median "$t" 3) | $(median "$t" 4) | $(median "$t" 5) |"
  done
  echo
  echo "## Reproduce"
  echo
  echo "\`bench/run --scale --sizes '${scale_sizes}' --runs $runs [--nats-server PATH]\`: per size,"
  echo '```sh'
  echo "kvfold_bench_tool load --server URL --bucket sN --keys N"
  echo "kvfold_bench_tool raw --server URL --bucket sN                      # the wire"
  echo "kvfold mirror --server URL --bucket sN --fold F --until-caught-up --request-timeout 60s  # catch-up (then resume)"
  echo "kvfold export --fold F --to dir:A ; kvfold seed --fold G --from dir:A"
  echo "kvfold_bench_tool getlat --server URL --bucket sN --fold F --keys N  # after loading N/10 updates"
  if [ -s "$work/heaped" ]; then
    echo "heaptrack -o H kvfold mirror ... ; heaptrack_print -f H.zst --flamegraph-cost-type peak -F S ; bench/heap_stages <S"
  fi
  echo '```'
} >"$report.tmp"
mv "$report.tmp" "$report"
log "wrote $report"
