-- confirm.lua: hand over deliveries held since a lookahead fetch (fetch.lua
-- mode 3 moves time-based messages to prepare shortly before they are due,
-- with a held token: lib.lua; the client holds them) at their instant: each
-- is checked to be still the client's and due by Redis's clock before its
-- listener is called, and gets a delivery token below HELD_TOKEN, the mark
-- of a delivery handed to a listener. While held, a message counts as
-- waiting in store: a send merges into it or replaces it and a remove
-- finds it waiting (both take its prepare entry away), and a lease that
-- runs out counts no attempt, so what happened meanwhile is what would
-- have happened in store.
--
-- A call that hands something over records its answer under its record
-- key, named by a nonce the client draws for the call, for RECORD_MS: a
-- second run of the same call (go-redis resends one whose reply was lost)
-- finds it and answers the same, changing nothing. Nothing else can make a
-- call believe it ran before: tokens are not unique per delivery (a salt of
-- 500 values and the attempt), so the token another delivery of the id got
-- from a fetch, or from another holder's confirm, may be the very one this
-- call would have given; only this call's own record says it handed over.
--
-- KEYS[g] -> prepare ZSET of slot group g (a single node: groups may be
--            of different topics)
-- KEYS[G+1] -> the call's record STRING (in group 1's hash tag)
-- ARGV[1] -> G, the number of groups; then per group: k, then k triples of
--            id, held delivery token, store score (the due ms the fetch
--            took)
-- Returns: { nowUs, { code, ... }, { token, ... } }: one code per held
-- delivery, in order, and per code 1 the token it is delivered with, in
-- order:
--   0 gone: the prepare entry is not this delivery's any more (a send or a
--     remove took it back to store, or its lease ran out and the sweeper
--     gave it back; whatever holds the id there now is another delivery's,
--     left as it is); nothing is to be delivered
--   1 deliver it, with the token that follows: the held token less
--     HELD_TOKEN
--   2 not due yet by Redis's clock: hold it on (never delivered early)
-- A second run of a call answers what its record says (with this run's
-- nowUs).
local RECORD_MS = 60000
local G = tonumber(ARGV[1])
local now, now_us = now_ms()
local record = KEYS[G + 1]
local done = redis.call('GET', record)
if done then
  -- This call ran before: its codes (one digit each), then its tokens.
  local sep = string.find(done, ':', 1, true)
  local codes, tokens = {}, {}
  for i = 1, sep - 1 do codes[i] = string.byte(done, i) - 48 end
  for t in string.gmatch(string.sub(done, sep + 1), '%d+') do tokens[#tokens + 1] = tonumber(t) end
  return { now_us, codes, tokens }
end
local codes, tokens = {}, {}
local a = 2
for g = 1, G do
  local prepare = KEYS[g]
  local k = tonumber(ARGV[a])
  a = a + 1
  for _ = 1, k do
    local id, token, score = ARGV[a], tonumber(ARGV[a + 1]), tonumber(ARGV[a + 2])
    a = a + 3
    local s = redis.call('ZSCORE', prepare, id)
    local cur = s and token_of(s)
    local code = 0
    if cur == token and score > now then
      code = 2
    elseif cur == token then
      -- The lease deadline stays; the token says it was handed over.
      cur = token - HELD_TOKEN
      redis.call('ZADD', prepare, string.format('%d', math.floor(tonumber(s) / TOKEN_MOD)) .. string.format('%06d', cur), id)
      code = 1
    end
    codes[#codes + 1] = code
    if code == 1 then tokens[#tokens + 1] = cur end
  end
end
if #tokens > 0 then
  redis.call('SET', record, table.concat(codes) .. ':' .. table.concat(tokens, ','), 'PX', RECORD_MS)
end
return { now_us, codes, tokens }
