# A guest restored from a saved template, made its own ($dev: its data disk; $2: its name).
# stdin: random bytes from the host. stdout: the data disk's size in bytes.
set -e
hostname "$2"
# Every restored kernel starts from the template's RNG state: mix in the host's bytes, then
# reseed the CRNG from them now (ioctl RNDRESEEDCRNG; perl-base is in every Debian system).
cat > /dev/urandom
perl -e 'open(my $f, "<", "/dev/urandom") or die "$!\n"; ioctl($f, 0x5207, 0) or die "RNDRESEEDCRNG: $!\n"'
# The saved page cache holds the template's data-disk blocks: drop them, re-read its partitions.
sync
echo 3 > /proc/sys/vm/drop_caches
blockdev --rereadpt "$dev" 2>/dev/null || true
blockdev --getsize64 "$dev"
