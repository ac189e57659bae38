# MySQL/MariaDB runner (after find-disk.sh), the same in a guest and on the host: makes the
# filesystem on the data disk, initialises a private datadir, starts the server on a private
# socket with networking off, runs sysbench prepare and run, and always stops the server and
# unmounts. stdout: sysbench's run output unchanged, then the CPU time of the runner's work
# (report_cpu). stderr: progress, then the server config and log between markers. Settings come
# from DB_* and SB_* variables.
set -u
mnt=$DB_MOUNT
sock=$mnt/mysqld.sock
pid=$mnt/mysqld.pid
say() { echo "run-mysql: $*" >&2; }
stop() {
  if [ -f "$pid" ]; then
    kill "$(cat "$pid")" 2>/dev/null
    for _ in $(seq 1 100); do [ -f "$pid" ] || break; sleep 0.2; done
  fi
  echo "=== server config ===" >&2; cat "$mnt/server.cnf" >&2 2>/dev/null
  echo "=== server log ===" >&2; tail -c 20000 "$mnt/error.log" >&2 2>/dev/null
  # the next user of the disk (an array built on it, say) must not find our filesystem's signature
  cd /; umount "$mnt" 2>/dev/null && { rmdir "$mnt" 2>/dev/null; wiped "$dev"; }
}
fail() {  # the reason, with the server's last error when it has one
  err=$(grep -h '\[ERROR\]' "$mnt/error.log" 2>/dev/null | tail -1 | sed 's/.*\[ERROR\] //')
  say "$*${err:+: $err}"; exit 5
}
mkdir -p "$mnt"
mkfs."$DB_FS" -q -F "$dev" >/dev/null 2>&1 || mkfs."$DB_FS" -f "$dev" >/dev/null 2>&1 || fail "mkfs.$DB_FS on $dev failed"
mount "$dev" "$mnt" || fail "mounting $dev failed"
trap stop EXIT
trap 'exit 143' TERM INT  # dash runs the EXIT trap only on exit: so that a stopped run cleans up too
mkdir -p "$mnt/tmp"  # a private tmpdir: servers side by side must not share temporary files
avail=$(df -k --output=avail "$mnt" | tail -1)
[ $((avail * 1024)) -gt "$DB_NEED_BYTES" ] || fail "the data does not fit the disk: about $DB_NEED_BYTES bytes needed, $((avail * 1024)) free on $dev"
cat > "$mnt/server.cnf" <<CNF
[mariadbd]
datadir=$mnt/data
socket=$sock
pid-file=$pid
log-error=$mnt/error.log
tmpdir=$mnt/tmp
secure_file_priv=$mnt/tmp
skip-networking
user=root
innodb_page_size=$DB_PAGE_SIZE
innodb_buffer_pool_size=$DB_BUFFER_POOL
innodb_flush_method=O_DIRECT
innodb_log_file_size=$DB_LOG_FILE_SIZE
innodb_file_per_table=1
CNF
mariadb-install-db --defaults-file="$mnt/server.cnf" --auth-root-authentication-method=normal --skip-test-db \
  >"$mnt/install.log" 2>&1 || { cat "$mnt/install.log" >&2; fail "mariadb-install-db failed"; }
mariadbd --defaults-file="$mnt/server.cnf" </dev/null >/dev/null 2>&1 &
for _ in $(seq 1 300); do mariadb -S "$sock" -uroot -e 'select 1' >/dev/null 2>&1 && break; sleep 0.2; done
mariadb -S "$sock" -uroot -e 'create database sbtest' || fail "the server did not start (see its log below)"
# sysbench runs confined (confine.sh): of the host it sees only the server's socket. The server
# (vtb's own configuration, stopped by its pid file) runs as is, its file statements kept to its
# own tmpdir (secure_file_priv).
sb() { confined "$sock" "" sysbench "$SB_TEST" --db-driver=mysql --mysql-socket="$sock" --mysql-user=root --mysql-db=sbtest \
       --tables="$SB_TABLES" --table-size="$SB_TABLE_SIZE" --threads="$SB_THREADS" "$@"; }
sb prepare >/dev/null 2>"$mnt/prepare.err" || { cat "$mnt/prepare.err" >&2; fail "sysbench prepare failed"; }
if [ "$DB_KEY_BLOCK_SIZE" != 0 ]; then
  for i in $(seq 1 "$SB_TABLES"); do
    mariadb -S "$sock" -uroot sbtest -e "alter table sbtest$i row_format=compressed key_block_size=$DB_KEY_BLOCK_SIZE" \
      || fail "compressing sbtest$i failed"
  done
fi
say "data: $(mariadb -S "$sock" -uroot -N -e "select sum(data_length+index_length) from information_schema.tables where table_schema='sbtest'") bytes"
sb --time="$SB_TIME" --report-interval=0 --histogram=off run || fail "sysbench run failed"
# the server's CPU time so far (utime + stime, in ticks), before it is stopped
report_cpu "$(awk -v hz="$(getconf CLK_TCK)" '{ printf "%.3f", ($14 + $15) / hz }' "/proc/$(cat "$pid")/stat" 2>/dev/null || echo 0)"
