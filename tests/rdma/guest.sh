#!/bin/bash
# Runs a shell script inside a small QEMU guest whose kernel has soft-RoCE
# (rdma_rxe), so Lanes' verbs code meets real verbs on machines whose own
# kernel lacks the module. The guest boots Debian's kernel from /boot with an
# initramfs made here: busybox, iproute2 (ip, rdma), libibverbs with the rxe
# provider, the kernel modules soft-RoCE needs, and the files named with
# --add (executables bring the libraries ldd lists) at their own paths. It
# exports what --env sets to the script. It makes one Ethernet
# device (veth0, its peer veth1), 10.77.0.1/24 on it, the soft-RoCE device
# rxe0 on it, runs the script with /bin/sh in /work, and powers off. Processes
# of the guest reach each other through rxe0's own address (rxe loops those
# packets back inside the device).
#
#   tests/rdma/guest.sh [--timeout S] [--memory MiB] [--cpus N] [--add PATH|COMMAND]...
#                       [--env NAME=VALUE]... SCRIPT
#
# Exit status: the script's; 77 when no guest can run here (the reason on
# stderr: no QEMU, no kernel with rdma_rxe); 124 when the guest did not finish
# within the timeout (default 600 s); so a script should not exit with those itself. KVM is used where /dev/kvm opens, else
# QEMU's emulation (slower). Needs no root.
set -u
timeout_s=600 memory=1024 cpus=2 adds=() envs=()
while [ $# -gt 1 ]; do
  case "$1" in
    --timeout) timeout_s=$2; shift 2 ;;
    --memory) memory=$2; shift 2 ;;
    --cpus) cpus=$2; shift 2 ;;
    --add) adds+=("$2"); shift 2 ;;
    --env) envs+=("$2"); shift 2 ;;
    *) break ;;
  esac
done
[ $# -eq 1 ] || { sed -n '14,20p' "$0" >&2; exit 2; }
script=$1
[ -r "$script" ] || { echo "guest.sh: cannot read $script" >&2; exit 2; }

skip() { echo "guest.sh: SKIP: $*" >&2; exit 77; }
PATH=$PATH:/sbin:/usr/sbin # modprobe, for users without them on PATH
command -v qemu-system-x86_64 >/dev/null || skip "no qemu-system-x86_64 (apt-get install qemu-system-x86)"
command -v busybox >/dev/null || skip "no busybox (apt-get install busybox-static)"
for t in ip rdma cpio; do command -v $t >/dev/null || skip "no $t (iproute2, cpio)"; done
kernel='' release=''
for k in $(ls -1 /boot/vmlinuz-* 2>/dev/null | sort -V -r); do
  r=${k#/boot/vmlinuz-}
  if [ -r "$k" ] && modprobe -S "$r" --show-depends rdma_rxe >/dev/null 2>&1; then
    kernel=$k release=$r
    break
  fi
done
[ -n "$kernel" ] || skip "no readable /boot/vmlinuz-* with rdma_rxe in /lib/modules (apt-get install linux-image-amd64)"
provider=$(ls /usr/lib/x86_64-linux-gnu/libibverbs/librxe-rdmav*.so 2>/dev/null | head -n1)
[ -n "$provider" ] || skip "no rxe verbs provider (apt-get install rdma-core ibverbs-providers)"

work=$(mktemp -d /tmp/lanes-guest.XXXXXX)
qemu=''
# On any exit the guest goes too: timeout runs it in a process group of its
# own (which a signal to the harness does not reach), killed whole here.
trap 'if [ -n "$qemu" ]; then kill -KILL -- -"$qemu" 2>/dev/null; fi; rm -rf "$work"' EXIT
trap 'exit 143' INT TERM HUP
root=$work/root
mkdir -p "$root"/{bin,sbin,dev,proc,sys,tmp,work,lib/modules,etc/libibverbs.d}

# put FILE [DEST]: FILE at its own path in the guest (or DEST), and, for
# executables and libraries, what the dynamic loader needs for it.
put() {
  local src=$1 dst=${2:-$1}
  mkdir -p "$root$(dirname "$dst")"
  cp -L "$src" "$root$dst"
  ldd "$src" 2>/dev/null | grep -o '/[^ ]*' | while read -r lib; do
    [ -e "$root$lib" ] || { mkdir -p "$root$(dirname "$lib")" && cp -L "$lib" "$root$lib"; }
  done
}
put "$(command -v busybox)" /bin/busybox
put "$(command -v ip)" /usr/local/sbin/ip
put "$(command -v rdma)" /usr/local/sbin/rdma
put "$provider"
cp /etc/libibverbs.d/rxe.driver "$root/etc/libibverbs.d/"
for m in rdma_rxe veth crc32_generic; do
  modprobe -S "$release" --show-depends "$m" | awk '$1 == "insmod" { print $2 }'
done | awk '!seen[$0]++' >"$work/modules"
i=0
while read -r ko; do
  case "$ko" in
    *.ko.xz) xz -dc "$ko" >"$root/lib/modules/$i.ko" ;;
    *.ko.zst) zstd -qdc "$ko" >"$root/lib/modules/$i.ko" ;;
    *) cp "$ko" "$root/lib/modules/$i.ko" ;;
  esac || { echo "guest.sh: could not unpack $ko (xz, zstd)" >&2; exit 2; }
  i=$((i + 1))
done <"$work/modules"
for a in "${adds[@]}"; do
  f=$a
  [ -e "$f" ] || f=$(command -v "$a") || { echo "guest.sh: no such file or command: $a" >&2; exit 2; }
  put "$(cd "$(dirname "$f")" && pwd)/$(basename "$f")"
done
for e in "${envs[@]}"; do
  case "$e" in
    [A-Za-z_]*=*)
      case "${e%%=*}" in *[!A-Za-z0-9_]*) echo "guest.sh: bad --env name in $e" >&2; exit 2 ;; esac
      printf "export %s='%s'\n" "${e%%=*}" "$(printf %s "${e#*=}" | sed "s/'/'\\\\''/g")" ;;
    *) echo "guest.sh: --env wants NAME=VALUE, not $e" >&2; exit 2 ;;
  esac
done >"$root/work/run.sh"
cat "$script" >>"$root/work/run.sh"

cat >"$root/init" <<'INIT'
#!/bin/busybox sh
/bin/busybox --install -s /bin
export PATH=/usr/local/sbin:/usr/bin:/bin:/sbin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
# /tmp stays the initramfs' own (already in memory): files added from a host
# path under /tmp live there.
mkdir -p /dev/shm && mount -t tmpfs shm /dev/shm
for ko in $(ls /lib/modules | sort -n); do insmod /lib/modules/$ko || echo "guest: insmod $ko failed"; done
# iproute2's ip by its path: busybox's shell runs its own applets first.
ip=/usr/local/sbin/ip
$ip link set lo up
$ip link add veth0 type veth peer name veth1 || echo "guest: no veth0"
$ip addr add 10.77.0.1/24 dev veth0
$ip link set veth0 up
$ip link set veth1 up
rdma link add rxe0 type rxe netdev veth0 || echo "guest: rdma link add failed"
cd /work
echo "LANES-GUEST-BEGIN"
sh /work/run.sh
status=$?
echo
echo "LANES-GUEST-EXIT $status"
poweroff -f
INIT
chmod +x "$root/init" "$root/bin/busybox"
(cd "$root" && find . | cpio -o -H newc --quiet | gzip -1) >"$work/initrd.gz"

# boot ACCEL CPU: the guest in the background, its console in $work/console.
boot() {
  timeout -k 5 "$timeout_s" qemu-system-x86_64 -machine "q35,accel=$1" -cpu "$2" -m "$memory" \
    -smp "$cpus" -nographic -no-reboot -kernel "$kernel" -initrd "$work/initrd.gz" \
    -append "console=ttyS0 loglevel=6 panic=-1 rdinit=/init" -nic none >"$work/console" 2>&1 &
  qemu=$!
}
# KVM where the kernel starts within 10 s (nested, KVM can fail or hang in
# the firmware), else QEMU's own emulation.
started=''
if [ -r /dev/kvm ] && [ -w /dev/kvm ]; then
  boot kvm host,-arch-capabilities
  for _ in $(seq 20); do
    grep -q "Linux version" "$work/console" 2>/dev/null && {
      started=kvm
      break
    }
    kill -0 "$qemu" 2>/dev/null || break
    sleep 0.5
  done
  [ -n "$started" ] || { kill -KILL -- -"$qemu" 2>/dev/null; wait "$qemu" 2>/dev/null; }
fi
[ -n "$started" ] || boot tcg max
wait "$qemu"
rc=$?
qemu=''
# The console, from the script's start (the boot log before it on failure).
if grep -q "LANES-GUEST-BEGIN" "$work/console"; then
  tr -d '\r' <"$work/console" | grep '^guest: ' >&2
  sed -n '/LANES-GUEST-BEGIN/,$p' "$work/console" | sed '1d' | tr -d '\r' |
    grep -v -e '^LANES-GUEST-EXIT' -e 'reboot: Power down'
else
  tr -d '\r' <"$work/console" | tail -n 40
fi
status=$(tr -d '\r' <"$work/console" | sed -n 's/^LANES-GUEST-EXIT \([0-9]*\)$/\1/p' | tail -n1)
if [ -n "$status" ]; then exit "$status"; fi
[ "$rc" -eq 124 ] && { echo "guest.sh: the guest did not finish within ${timeout_s}s" >&2; exit 124; }
echo "guest.sh: the guest ended without the script's status (qemu exit $rc)" >&2
exit 1
