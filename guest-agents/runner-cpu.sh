# Sourced (prepended) by the runners: `report_cpu [SECONDS]` prints "vtb-runner-cpu-s: S", the CPU
# seconds (user + system) of the runner's waited-for children (the tool, mkfs) plus SECONDS (a
# server it started). On a host, the harness counts that as the point's own work, not as other
# work on the host (harness/measure/pipeline.py).
report_cpu() {
  times_file=$(mktemp)
  times > "$times_file"
  awk -v extra="${1:-0}" 'NR == 2 { s = 0; for (i = 1; i <= NF; i++) { split($i, p, "m"); s += p[1] * 60 + p[2] }
    printf "vtb-runner-cpu-s: %.3f\n", s + extra }' "$times_file"
  rm -f "$times_file"
}
