//! The fleet's atomic steps, each one Lua script run by Redis itself: no
//! read-modify-write from daemons. Time is Redis's own (`TIME`), so the
//! daemons' clocks never need to agree.

/// Take or renew a lease. `KEYS[1]` the lease, `ARGV` node and TTL in ms.
/// Answers the owner after the call (this node when it holds the lease).
pub const LEASE: &str = r"
local owner = redis.call('GET', KEYS[1])
if not owner then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return ARGV[1]
end
if owner == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return owner
";

/// Give a lease back if this node holds it. `KEYS[1]` the lease, `ARGV[1]` node.
pub const RELEASE: &str = r"
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
";

/// A request budget shared by the fleet, paced like the local one (GCRA):
/// each request reserves the next free start `ARGV[1]` ms after the
/// previous one. `KEYS[1]` the strategy's next free start; `ARGV[2]` the
/// longest wait the caller takes. Answers `{1, wait_ms}` (reserved: start
/// after that wait) or `{0, wait_ms}` (nothing reserved: too far away).
pub const PACE: &str = r"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local interval = tonumber(ARGV[1])
local nxt = tonumber(redis.call('GET', KEYS[1]) or '0')
local at = math.max(now, nxt)
if at - now > tonumber(ARGV[2]) then
  return {0, at - now}
end
redis.call('SET', KEYS[1], string.format('%d', at + interval), 'PX', at - now + interval + 1000)
return {1, at - now}
";

/// A fleet-wide in-flight bound: a sorted set of tokens scored by when they
/// lapse (a daemon that dies mid-call leaks nothing for long). `KEYS[1]`
/// the set; `ARGV` the bound, the token, its lifetime in ms. Answers 1
/// (taken) or 0 (full).
pub const ENTER: &str = r"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[1]) then
  return 0
end
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[3]), ARGV[2])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return 1
";
