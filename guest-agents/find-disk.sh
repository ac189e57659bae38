# Sourced (prepended) by the runners: sets $dev to the data disk named by $locator:
#   serial:<s>  virtio-blk (serial), NVMe (device/serial, space-padded), SCSI (VPD page 0x80)
#   pci:<addr>  a disk behind this PCI function (vhost-user-blk, a passed-through controller)
#   path:<dev>  a device path as is (the host side)
#   rbd:<pool>/<image>@<conf>[#<id>]  a Ceph RBD image through librbd (the host side), in the cluster <conf>
#               names, as client.<id> (admin when unset)
want=${locator#*:}
dev=
case $locator in
  path:*) dev=$want ;;
  rbd:*) rbd_image=${want%%@*}; dev=$rbd_image
    case $want in *@*) conf=${want#*@}
      case $conf in *'#'*) export FIO_RBD_ID=${conf##*#}; conf=${conf%#*} ;; esac
      export CEPH_CONF=$conf ;;
    esac ;;
  *)
    for b in /sys/block/*; do
      case $locator in
        serial:*)
          # read, a builtin, trims NVMe's space padding without a process per file (each costs a
          # TCG guest tens of ms, and every point runs this); SCSI's VPD page has a binary header
          for f in "$b/serial" "$b/device/serial"; do
            s=
            if [ -r "$f" ]; then read -r s < "$f" || :; fi
            if [ "$s" = "$want" ]; then dev=/dev/${b##*/}; fi
          done
          if [ -z "$dev" ] && [ -r "$b/device/vpd_pg80" ] &&
             [ "$(tail -c +5 "$b/device/vpd_pg80" | tr -d ' \000')" = "$want" ]; then
            dev=/dev/${b##*/}
          fi ;;
        pci:*)
          case $(readlink -f "$b") in */"$want"/*) dev=/dev/${b##*/} ;; esac ;;
      esac
    done ;;
esac
[ -n "$dev" ] || { echo "no disk matching '$locator' here" >&2; exit 3; }
