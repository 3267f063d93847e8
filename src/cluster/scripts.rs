//! The fleet's atomic steps, each one Lua script run by Redis itself: no
//! read-modify-write from daemons. Time is Redis's own (`TIME`), so the
//! daemons' clocks never need to agree.

/// Take a lease, unless a live daemon holds it. A lease names its owner
/// and lives as long as the owner's registration (`node:<name>`, renewed
/// every heartbeat with a TTL): one write per daemon keeps every identity
/// it holds, and a dead daemon's identities lapse with its registration.
/// `KEYS[1]` the lease; `ARGV[1]` this node, `ARGV[2]` the prefix of node
/// keys. Answers the owner after the call.
pub const TAKE: &str = r"
local owner = redis.call('GET', KEYS[1])
if owner == ARGV[1] then
  return owner
end
if (not owner) or redis.call('EXISTS', ARGV[2] .. owner) == 0 then
  redis.call('SET', KEYS[1], ARGV[1])
  return ARGV[1]
end
return owner
";

/// The heartbeat's registration, and the fleet's live daemons in the same
/// round trip. `KEYS[1]` this node's key, `KEYS[2]` the set of names;
/// `ARGV` the node's record, its TTL in ms, its name and the prefix of node
/// keys. Answers every live daemon's record; names whose key lapsed leave
/// the set.
pub const REGISTER: &str = r"
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
redis.call('SADD', KEYS[2], ARGV[3])
local names = redis.call('SMEMBERS', KEYS[2])
local keys = {}
for i, n in ipairs(names) do keys[i] = ARGV[4] .. n end
local found = redis.call('MGET', unpack(keys))
local live = {}
for i, n in ipairs(names) do
  if found[i] then
    live[#live + 1] = found[i]
  else
    redis.call('SREM', KEYS[2], n)
  end
end
return live
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
