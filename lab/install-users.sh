#!/bin/sh
# Creates the local users the lab's non-root SSH tests log in as, and only
# those that are missing (run as root; `make test` does it):
#   kremedy-op      an operator: may run any command through `sudo -n`
#                   (a NOPASSWD rule in /etc/sudoers.d/kremedy-lab), as an
#                   on-call engineer on a broker host usually may;
#   kremedy-nosudo  a login without sudo rights;
#   kremedy-kafka   the service user a secured lab's brokers run as
#                   (`lab up --secure`), owner of their data; no login;
#   kremedy-approvers  a group of kremedy-op and kremedy-nosudo: the
#                   approvers' group (policy.group) the team test shares a
#                   run directory with (kremedy-op runs, kremedy-nosudo
#                   approves from its own account).
# Neither has a password (logins are by the lab's key only, on the lab's
# own sshd on loopback addresses); `make lab-users-remove` deletes them all.
set -eu
if [ "$(id -u)" != 0 ]; then
  echo "lab users: run as root (sudo make lab-users) to create kremedy-op and kremedy-nosudo" >&2; exit 2
fi
command -v sudo >/dev/null 2>&1 || {
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends sudo >/dev/null; }
for u in kremedy-op kremedy-nosudo; do
  if ! id "$u" >/dev/null 2>&1; then
    useradd --create-home --shell /bin/sh "$u"
    # '*': no password, yet not locked ('!'), which sshd without PAM refuses.
    usermod -p '*' "$u"
    echo "lab users: created $u"
  fi
done
if ! id kremedy-kafka >/dev/null 2>&1; then
  useradd --system --no-create-home --shell /usr/sbin/nologin kremedy-kafka
  echo "lab users: created kremedy-kafka"
fi
# sudo also logs every command it runs to /var/log/kremedy-lab-sudo.log,
# unwrapped (loglinelen=0): the secured lab test reads it to prove that no
# secret reaches a command line (sudo logs COMMAND= in full).
rule='Defaults logfile=/var/log/kremedy-lab-sudo.log, loglinelen=0
kremedy-op ALL=(ALL) NOPASSWD: ALL'
if [ "$(cat /etc/sudoers.d/kremedy-lab 2>/dev/null)" != "$rule" ]; then
  printf '%s\n' "$rule" > /etc/sudoers.d/kremedy-lab.tmp
  chmod 0440 /etc/sudoers.d/kremedy-lab.tmp
  visudo -cf /etc/sudoers.d/kremedy-lab.tmp >/dev/null
  mv /etc/sudoers.d/kremedy-lab.tmp /etc/sudoers.d/kremedy-lab
fi
if ! getent group kremedy-approvers >/dev/null 2>&1; then
  groupadd kremedy-approvers
  echo "lab users: created group kremedy-approvers"
fi
for u in kremedy-op kremedy-nosudo; do
  if ! id -nG "$u" | tr ' ' '\n' | grep -qx kremedy-approvers; then
    usermod -aG kremedy-approvers "$u"
    echo "lab users: added $u to kremedy-approvers"
  fi
done
