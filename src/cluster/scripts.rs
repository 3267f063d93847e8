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
/// round trip. `KEYS[1]` this node's key, `KEYS[2]` the set of names,
/// `KEYS[3]` each name's last beat (Redis ms); `ARGV` the node's record,
/// its TTL in ms, its name and the prefix of node keys. Answers every live
/// daemon's record followed by how long ago it last beat (ms; 0 for a
/// daemon that does not write beats); names whose key lapsed leave the set.
pub const REGISTER: &str = r"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
redis.call('SADD', KEYS[2], ARGV[3])
redis.call('HSET', KEYS[3], ARGV[3], string.format('%d', now))
local names = redis.call('SMEMBERS', KEYS[2])
local keys = {}
for i, n in ipairs(names) do keys[i] = ARGV[4] .. n end
local found = redis.call('MGET', unpack(keys))
local beats = redis.call('HMGET', KEYS[3], unpack(names))
local live = {}
for i, n in ipairs(names) do
  if found[i] then
    live[#live + 1] = found[i]
    local at = tonumber(beats[i]) or now
    live[#live + 1] = string.format('%d', math.max(now - at, 0))
  else
    redis.call('SREM', KEYS[2], n)
    redis.call('HDEL', KEYS[3], n)
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

/// The fleet's request budget for one strategy, paced like the local one
/// (GCRA): `KEYS[1]` the hash `budget:<strategy>` (`rate`: the adaptive
/// rate in force, per minute; `next`: the next free start, ms; `cut_at`,
/// `cuts`; and, once cut, the fleet's starts and answers counted in
/// buckets of `ARGV[8]` ms: `at`, `sent`, `taken`, `refused` the one
/// filling now, `p_…` the one before). `ARGV`: the strategy's own rate (0:
/// none), the longest wait the caller takes (ms), `1` when the budget is
/// adaptive, the growth this daemon's successes earned since its last call,
/// the cap (0: none), the answers it heard the site take and refuse since.
/// Answers `{1, wait_ms, rate×10}` (reserved: start after that wait) or
/// `{0, wait_ms, rate×10}` (nothing reserved: too far away); rate×10 is
/// -10 with no rate in force. Four commands in all (`EVALSHA`, `TIME`,
/// `HMGET`, `HSET`).
pub const PACE: &str = r"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local h = KEYS[1]
local f = redis.call('HMGET', h, 'rate', 'next', 'at', 'sent', 'taken', 'refused')
local rate = tonumber(ARGV[1])
local set = {}
local counted = ARGV[3] == '1' and f[1]
if counted then
  rate = tonumber(f[1]) + tonumber(ARGV[4])
  local cap = tonumber(ARGV[5])
  if cap > 0 and rate > cap then rate = cap end
  if tonumber(ARGV[4]) > 0 then
    set[#set + 1] = 'rate'
    set[#set + 1] = tostring(rate)
  end
end
if rate <= 0 then
  return {1, 0, -10}
end
local at = math.max(now, tonumber(f[2] or '0'))
local reserved = at - now <= tonumber(ARGV[2])
if reserved then
  set[#set + 1] = 'next'
  set[#set + 1] = string.format('%d', math.floor(at + 60000 / rate))
end
if counted then
  local bucket = tonumber(ARGV[8])
  local b0 = tonumber(f[3] or now)
  local sent, taken, refused = tonumber(f[4] or '0'), tonumber(f[5] or '0'), tonumber(f[6] or '0')
  if now - b0 >= bucket then
    -- The bucket filled: it becomes the one before. Two or more buckets
    -- old, nobody reserved over the last one (this call would have turned
    -- it), so that one saw nothing.
    local pat, ps, pt, pr = b0, sent, taken, refused
    if now - b0 >= 2 * bucket then
      pat, ps, pt, pr = now - bucket, 0, 0, 0
    end
    for _, v in ipairs({'p_at', pat, 'p_sent', ps, 'p_taken', pt, 'p_refused', pr}) do
      set[#set + 1] = v
    end
    b0, sent, taken, refused = now, 0, 0, 0
  end
  if reserved then sent = sent + 1 end
  taken = taken + tonumber(ARGV[6])
  refused = refused + tonumber(ARGV[7])
  for _, v in ipairs({'at', b0, 'sent', sent, 'taken', taken, 'refused', refused}) do
    set[#set + 1] = v
  end
end
if #set > 0 then
  redis.call('HSET', h, unpack(set))
end
if not reserved then
  return {0, at - now, math.floor(rate * 10)}
end
return {1, at - now, math.floor(rate * 10)}
";

/// The site pushed back on one of the fleet's identities (`ARGV[6]`):
/// once pushbacks came from `ARGV[8]` identities within `ARGV[7]` ms (the
/// site's word, not one identity's business), cut the fleet's budget, at
/// most once every `ARGV[1]` ms (answers to requests sent before a cut say
/// nothing new); the pushbacks are spent by the cut. The cut is from the
/// rate the site accepted, or from the rate in force when that is less:
/// times `ARGV[2]`, never under the floor `ARGV[3]`, never over the cap
/// `ARGV[4]` (0: none). The rate accepted is measured once the budget was
/// cut before ([`PACE`] counts the fleet's starts and answers since: starts
/// a minute over the last one or two buckets times the share of answers
/// the site took); before the first cut it is `ARGV[5]`, the caller's
/// estimate. `KEYS[1]` the hash [`PACE`] keeps (forgotten an hour after
/// the last cut), `KEYS[2]` the recent pushbacks (identity → when).
/// Answers `{1, from×10, to×10, accepted×10}` (cut; from -10: no rate was
/// in force) or `{0, 0, rate×10, -10}` (not cut).
pub const CUT: &str = r"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local h = KEYS[1]
local window = tonumber(ARGV[7])
redis.call('ZADD', KEYS[2], now, ARGV[6])
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now - window)
redis.call('PEXPIRE', KEYS[2], window)
local f = redis.call('HMGET', h, 'rate', 'cut_at', 'at', 'sent', 'taken', 'refused',
  'p_at', 'p_sent', 'p_taken', 'p_refused')
local rate = tonumber(f[1])
if redis.call('ZCARD', KEYS[2]) < tonumber(ARGV[8]) then
  return {0, 0, math.floor((rate or -1) * 10), -10}
end
if now - tonumber(f[2] or '0') < tonumber(ARGV[1]) then
  return {0, 0, math.floor((rate or -1) * 10), -10}
end
local accepted = tonumber(ARGV[5])
if accepted <= 0 then accepted = -1 end
if f[2] and f[3] then
  local from = tonumber(f[7] or f[3])
  local sent = tonumber(f[4]) + tonumber(f[8] or '0')
  local taken = tonumber(f[5]) + tonumber(f[9] or '0')
  local answers = taken + tonumber(f[6]) + tonumber(f[10] or '0')
  if answers > 0 and now > from then
    accepted = sent * 60000 / (now - from) * taken / answers
  end
end
local base = rate
if accepted >= 0 and ((not base) or accepted < base) then
  base = accepted
end
if not base then
  return {0, 0, -10, -10}
end
local to = math.max(base * tonumber(ARGV[2]), tonumber(ARGV[3]))
local cap = tonumber(ARGV[4])
if cap > 0 and to > cap then to = cap end
redis.call('HSET', h, 'rate', tostring(to), 'cut_at', string.format('%d', now),
  'at', string.format('%d', now), 'sent', 0, 'taken', 0, 'refused', 0)
redis.call('HDEL', h, 'p_at', 'p_sent', 'p_taken', 'p_refused')
redis.call('HINCRBY', h, 'cuts', 1)
redis.call('PEXPIRE', h, 3600000)
redis.call('DEL', KEYS[2])
return {1, math.floor((rate or -1) * 10), math.floor(to * 10), math.floor(accepted * 10)}
";
