# db_bench runner (after find-disk.sh), the same in a guest and on the host: RocksDB's db_bench on
# a new filesystem on the data disk, which is unmounted and wiped afterwards (the next user of the
# disk must not find our signature). Argument: LOCATOR; DB_* variables in the environment. Prints
# db_bench's output unchanged, then its CPU time (report_cpu); the last benchmark named is the
# measured one (a read benchmark is preceded by the fill that loads its keys).
command -v db_bench >/dev/null || { echo "run-db-bench: db_bench is not installed here (Debian: rocksdb-tools)" >&2; exit 6; }
mnt=$(mktemp -d /tmp/vtb-db-XXXXXX)
out=$($DB_MKFS "$dev" 2>&1) || { echo "run-db-bench: $DB_MKFS $dev failed: $(echo "$out" | head -n 2)" >&2; rmdir "$mnt"; exit 5; }
trap 'umount "$mnt"; rmdir "$mnt"; wiped "$dev"' EXIT
mount "$dev" "$mnt" || exit 5
db_bench --version   # its banner with the version goes to stderr
before=$(dmesg | wc -l)
confined "$mnt" "" db_bench --db="$mnt/db" --benchmarks="$DB_BENCHMARKS" --num="$DB_NUM" --value_size="$DB_VALUE_SIZE" \
  --threads="$DB_THREADS" --max_write_buffer_number="$DB_WRITE_BUFFERS" --batch_size="$DB_BATCH" \
  --use_direct_io_for_flush_and_compaction="$DB_DIRECT" --use_direct_reads="$DB_DIRECT" \
  --seed="$DB_SEED" --histogram=true --statistics=false --progress_reports=false || exit $?
report_cpu
bad=$(dmesg | tail -n +$((before + 1)) | grep -iE 'timeout|I/O error|abort|reset' | head -3)
[ -z "$bad" ] || { echo "run-db-bench: the kernel reported I/O trouble during the run: $bad" >&2; exit 4; }
