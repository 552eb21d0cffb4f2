# Check helpers for the guest test (POSIX sh). Each check appends one PASS: or FAIL: line to $E2E_RESULTS.
pass() { printf 'PASS: %s\n' "$*" | tee -a "$E2E_RESULTS"; }
fail() { printf 'FAIL: %s\n' "$*" | tee -a "$E2E_RESULTS"; }

# check DESCRIPTION COMMAND...: passes if the command succeeds.
check() {
  _what=$1; shift
  _out=$("$@" 2>&1); _status=$?
  if [ $_status -eq 0 ]; then pass "$_what"; else fail "$_what [status $_status: $(printf '%s' "$_out" | tail -n 3 | tr '\n' ' ')]"; fi
}

# expect DESCRIPTION WANTED COMMAND...: passes if the command prints exactly WANTED.
expect() {
  _what=$1; _wanted=$2; shift 2
  _got=$("$@" 2>/dev/null)
  if [ "$_got" = "$_wanted" ]; then pass "$_what"; else fail "$_what [wanted '$_wanted', got '$(printf '%s' "$_got" | tr '\n' '|')']"; fi
}

# expect_match DESCRIPTION REGEX COMMAND...: passes if the command's output matches the extended regex.
expect_match() {
  _what=$1; _pattern=$2; shift 2
  _got=$("$@" 2>&1)
  if printf '%s\n' "$_got" | grep -Eq -- "$_pattern"; then pass "$_what"
  else fail "$_what [no /$_pattern/ in: $(printf '%s' "$_got" | tail -n 3 | tr '\n' ' ')]"; fi
}

# within SECONDS COMMAND...: waits until the command succeeds (a condition systemd changes on its own schedule).
within() {
  _tenths=$(($1 * 10)); shift
  until "$@" >/dev/null 2>&1; do
    _tenths=$((_tenths - 1)); [ $_tenths -gt 0 ] || return 1
    sleep 0.1
  done
}
