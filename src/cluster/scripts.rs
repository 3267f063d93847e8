//! The fleet's atomic steps, each one Lua script run by Redis itself: no
//! read-modify-write from daemons. Time is Redis's own (`TIME`), so the
//! daemons' clocks never need to agree.

/// The heartbeat: this daemon's registration, its leases checked and
/// renewed, and the fleet's live daemons and identities without a host, in
/// one round trip (one script, so a starting daemon's first beat is one
/// command queued behind nothing of its own).
///
/// A lease names its owner and lives as long as the owner's registration
/// (`node:<name>`, renewed every beat with a TTL): one write per daemon
/// keeps every identity it holds. `KEYS`: this node's key, the set of
/// names, each name's last beat (Redis ms), each name's holdings (JSON
/// list), the identities without a host (sorted set, fleet id → since, ms).
/// `ARGV`: the node's record, its TTL in ms, its name, the prefix of node
/// keys, the prefix of lease keys, its holdings as JSON (`''`: unchanged
/// since its last beat), then the fleet ids whose leases it holds or
/// should hold.
///
/// Each of those leases is this daemon's when it names it, taken when it
/// names nobody or a daemon whose registration lapsed, and left to a live
/// holder otherwise; none of them is without a host any more (a daemon
/// back from a late beat keeps what it held). A name whose registration
/// lapsed leaves the set, and every identity its lease still names is
/// without a host from now (its holdings stay: a daemon back from a late
/// beat sends them only when they change).
///
/// Answers `{live, owners, {unhosted, oldest_ms}}`: every live daemon's
/// record followed by how long ago it last beat (ms), each checked lease's
/// owner after the call, how many identities have no host and how long the
/// oldest has waited.
pub const REGISTER: &str = r"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local me = ARGV[3]
local count = redis.call('ZCARD', KEYS[5])
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
redis.call('SADD', KEYS[2], me)
redis.call('HSET', KEYS[3], me, string.format('%d', now))
if ARGV[6] ~= '' then
  -- What its lease names it for but it no longer holds (its earlier life
  -- held it: it was killed and came back before its registration lapsed)
  -- is without a host from now.
  local before = redis.call('HGET', KEYS[4], me)
  local ok, old = pcall(cjson.decode, before or '[]')
  local ok2, new = pcall(cjson.decode, ARGV[6])
  if ok and ok2 and type(old) == 'table' and type(new) == 'table' then
    local keep = {}
    for _, fid in ipairs(new) do keep[fid] = true end
    for _, fid in ipairs(old) do
      if type(fid) == 'string' and not keep[fid] and redis.call('GET', ARGV[5] .. fid) == me then
        count = count + redis.call('ZADD', KEYS[5], 'NX', now, fid)
      end
    end
  end
  redis.call('HSET', KEYS[4], me, ARGV[6])
end
local owners, taken = {}, {}
local first = 7
while first <= #ARGV do
  local last = math.min(first + 499, #ARGV)
  local fids, lk = {}, {}
  for i = first, last do
    fids[#fids + 1] = ARGV[i]
    lk[#lk + 1] = ARGV[5] .. ARGV[i]
  end
  if count > 0 then
    count = count - redis.call('ZREM', KEYS[5], unpack(fids))
  end
  local cur = redis.call('MGET', unpack(lk))
  for i = 1, #fids do
    local o = cur[i]
    if o ~= me and ((not o) or redis.call('EXISTS', ARGV[4] .. o) == 0) then
      redis.call('SET', lk[i], me)
      taken[#taken + 1] = fids[i]
      o = me
    end
    owners[#owners + 1] = o
  end
  first = last + 1
end
if #taken > 0 then
  -- Its holdings name what it took at once: dead before its next beat, it
  -- leaves them listed.
  local ok, held = pcall(cjson.decode, redis.call('HGET', KEYS[4], me) or '[]')
  if not (ok and type(held) == 'table') then held = {} end
  local has = {}
  for _, fid in ipairs(held) do has[fid] = true end
  for _, fid in ipairs(taken) do
    if not has[fid] then held[#held + 1] = fid end
  end
  redis.call('HSET', KEYS[4], me, cjson.encode(held))
end
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
    local held = redis.call('HGET', KEYS[4], n)
    if held then
      local ok, fids = pcall(cjson.decode, held)
      if ok and type(fids) == 'table' then
        for _, fid in ipairs(fids) do
          if type(fid) == 'string' and redis.call('GET', ARGV[5] .. fid) == n then
            count = count + redis.call('ZADD', KEYS[5], 'NX', now, fid)
          end
        end
      end
    end
    redis.call('SREM', KEYS[2], n)
    redis.call('HDEL', KEYS[3], n)
  end
end
local oldest = 0
if count > 0 then
  local o = redis.call('ZRANGE', KEYS[5], 0, 0, 'WITHSCORES')
  oldest = math.max(now - tonumber(o[2]), 0)
end
return {live, owners, {count, oldest}}
";

/// A clean shutdown: the registration goes at once, and every identity
/// whose lease still names this daemon is without a host from now.
/// `KEYS`: as [`REGISTER`]'s; `ARGV[1]` the name, `ARGV[2]` the prefix of
/// lease keys, then the fleet ids it held.
pub const UNREGISTER: &str = r"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
for i = 3, #ARGV do
  if redis.call('GET', ARGV[2] .. ARGV[i]) == ARGV[1] then
    redis.call('ZADD', KEYS[5], 'NX', now, ARGV[i])
  end
end
redis.call('DEL', KEYS[1])
redis.call('SREM', KEYS[2], ARGV[1])
redis.call('HDEL', KEYS[3], ARGV[1])
redis.call('HDEL', KEYS[4], ARGV[1])
return 1
";

/// Adopt an identity without a host (and name it in this daemon's
/// holdings at once: dead before its next beat, it leaves it listed), once
/// the fleet has known it to be
/// without one for `ARGV[2]` ms (one more beat: a daemon whose beat was
/// late, not missed, comes back first and keeps it; a daemon back from a
/// restart takes its earlier life's at once). Being without a host is the
/// fleet's word, whoever the lease still names: a daemon that comes back
/// takes its own out of the set in the same script that renews it.
/// `KEYS[1]` the lease, `KEYS[2]` the identities without a host, `KEYS[3]`
/// the holdings; `ARGV[1]` this node, `ARGV[2]` the wait (ms), `ARGV[3]`
/// the fleet id.
/// Answers the owner after the call (`''`: nobody).
pub const ADOPT: &str = r"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local owner = redis.call('GET', KEYS[1])
local since = redis.call('ZSCORE', KEYS[2], ARGV[3])
if not since then
  return owner or ''
end
if owner ~= ARGV[1] and now - tonumber(since) < tonumber(ARGV[2]) then
  return owner or ''
end
redis.call('SET', KEYS[1], ARGV[1])
redis.call('ZREM', KEYS[2], ARGV[3])
local ok, held = pcall(cjson.decode, redis.call('HGET', KEYS[3], ARGV[1]) or '[]')
if not (ok and type(held) == 'table') then held = {} end
for _, fid in ipairs(held) do
  if fid == ARGV[3] then return ARGV[1] end
end
held[#held + 1] = ARGV[3]
redis.call('HSET', KEYS[3], ARGV[1], cjson.encode(held))
return ARGV[1]
";

/// Give a lease back if this node holds it: the identity is without a host
/// from now. `KEYS[1]` the lease, `KEYS[2]` the identities without a host;
/// `ARGV[1]` node, `ARGV[2]` the fleet id.
pub const RELEASE: &str = r"
if redis.call('GET', KEYS[1]) == ARGV[1] then
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  redis.call('ZADD', KEYS[2], 'NX', now, ARGV[2])
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
/// the cap (0: none), the answers it heard the site take and refuse since,
/// the bucket's length, and the generation (the budget's `cuts` when their
/// requests were reserved): answers of an older generation are not counted.
/// Answers `{1, wait_ms, rate×10, cuts}` (reserved: start after that wait)
/// or `{0, wait_ms, rate×10, cuts}` (nothing reserved: too far away);
/// rate×10 is -10 with no rate in force. Four commands in all (`EVALSHA`,
/// `TIME`, `HMGET`, `HSET`).
pub const PACE: &str = r"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local h = KEYS[1]
local f = redis.call('HMGET', h, 'rate', 'next', 'at', 'sent', 'taken', 'refused', 'cuts')
local cuts = tonumber(f[7] or '0')
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
  return {1, 0, -10, cuts}
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
  if tonumber(ARGV[9]) == cuts then
    taken = taken + tonumber(ARGV[6])
    refused = refused + tonumber(ARGV[7])
  end
  for _, v in ipairs({'at', b0, 'sent', sent, 'taken', taken, 'refused', refused}) do
    set[#set + 1] = v
  end
end
if #set > 0 then
  redis.call('HSET', h, unpack(set))
end
if not reserved then
  return {0, at - now, math.floor(rate * 10), cuts}
end
return {1, at - now, math.floor(rate * 10), cuts}
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
/// the site took), else `ARGV[5]`, the caller's estimate. The first word
/// from the site does not cut: it starts the measurement (at `ARGV[10]`, a
/// rate that paces nothing, or the cap), and answers `{2, -10, rate×10,
/// -10, cuts}`. `KEYS[1]` the hash [`PACE`] keeps (forgotten an hour after
/// the last cut), `KEYS[2]` the recent pushbacks (identity → when).
/// `ARGV[9]`: the generation the pushed-back request was reserved under (a
/// request paced by the rate before the last cut is old news). Answers
/// `{1, from×10, to×10, accepted×10, cuts}` (cut; from -10: no rate was
/// in force) or `{0, 0, rate×10, -10, cuts}` (not cut).
pub const CUT: &str = r"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local h = KEYS[1]
local window = tonumber(ARGV[7])
local pre = redis.call('HMGET', h, 'cuts', 'rate')
local cuts = tonumber(pre[1] or '0')
if tonumber(ARGV[9]) < cuts then
  return {0, 0, math.floor((tonumber(pre[2]) or -1) * 10), -10, cuts}
end
redis.call('ZADD', KEYS[2], now, ARGV[6])
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now - window)
redis.call('PEXPIRE', KEYS[2], window)
local f = redis.call('HMGET', h, 'rate', 'cut_at', 'at', 'sent', 'taken', 'refused',
  'p_at', 'p_sent', 'p_taken', 'p_refused')
local rate = tonumber(f[1])
if redis.call('ZCARD', KEYS[2]) < tonumber(ARGV[8]) then
  return {0, 0, math.floor((rate or -1) * 10), -10, cuts}
end
if now - tonumber(f[2] or '0') < tonumber(ARGV[1]) then
  return {0, 0, math.floor((rate or -1) * 10), -10, cuts}
end
if not f[2] then
  -- The site's first word: the fleet measures what the site takes before
  -- it cuts. From now every reservation counts its start and hands on its
  -- answers, paced by ARGV[10] (the cap, if less: near enough unpaced,
  -- the rate the fleet was sending anyway); the next pushback, at least
  -- ARGV[1] ms on, cuts from that measurement.
  local r = tonumber(ARGV[10])
  local cap = tonumber(ARGV[4])
  if cap > 0 and r > cap then r = cap end
  redis.call('HSET', h, 'rate', tostring(r), 'cut_at', string.format('%d', now),
    'at', string.format('%d', now), 'sent', 0, 'taken', 0, 'refused', 0)
  redis.call('HINCRBY', h, 'cuts', 1)
  redis.call('PEXPIRE', h, 3600000)
  redis.call('DEL', KEYS[2])
  return {2, -10, math.floor(r * 10), -10, cuts + 1}
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
  return {0, 0, -10, -10, cuts}
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
return {1, math.floor((rate or -1) * 10), math.floor(to * 10), math.floor(accepted * 10), cuts + 1}
";
