#!/bin/sh
# Installs what the lab needs on a fresh Debian machine, and only what is
# missing. Java 17 and Go are expected.
#
#   install-deps.sh demo   what `make demo` uses: OpenSSH's sshd (each lab
#                          broker host runs a real one) and Maven (to fetch
#                          Kafka releases from Maven Central)
#   install-deps.sh test   (the default; `make test`, CI) all of the above,
#                          and what the lab tests use besides: tmux (the TUI
#                          end-to-end tests), openssl and sudo (the store and
#                          non-root SSH tests), MIT Kerberos (the Kerberized lab)
set -eu
mode=${1:-test}
case $mode in
demo|test) ;;
*) echo "usage: $0 [demo|test] (demo: what make demo uses; test, the default: everything make test uses)" >&2; exit 2 ;;
esac
need=""
[ -x /usr/sbin/sshd ] || need="$need openssh-server"
command -v mvn >/dev/null 2>&1 || need="$need maven"
if [ "$mode" = test ]; then
  command -v tmux >/dev/null 2>&1 || need="$need tmux"
  command -v openssl >/dev/null 2>&1 || need="$need openssl"
  command -v sudo >/dev/null 2>&1 || need="$need sudo"
  # MIT Kerberos for the Kerberized lab (lab up --secure --kerberos): the KDC,
  # its admin tools (kadmin.local, kdb5_util) and the client tools (kinit).
  [ -x /usr/sbin/krb5kdc ] || need="$need krb5-kdc"
  [ -x /usr/sbin/kadmin.local ] || need="$need krb5-admin-server"
  command -v kinit >/dev/null 2>&1 || need="$need krb5-user"
fi
if [ -n "$need" ]; then
  echo "installing:$need"
  if [ "$(id -u)" = 0 ]; then SUDO=""; elif command -v sudo >/dev/null 2>&1; then SUDO="sudo -n"; else
    echo "missing:$need — install them (apt-get install$need) and rerun" >&2; exit 2; fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends $need >/dev/null
fi
command -v java >/dev/null 2>&1 || { echo "java is missing: install a JDK 17 (apt-get install openjdk-17-jre-headless)" >&2; exit 2; }
