-- flowstage.lua: stage the nodes of a flow (producer.SendFlow) that live in
-- one topic slot, invisible to every consumer: parents as records that
-- are not deliverable (their envelope kept in the record, outside store),
-- leaves in the slot's staged hash. flowact.lua makes them live once the
-- flow's root record is committed (docs/design.md, "Flows").
--
-- KEYS[1] -> stageq ZSET "l:<id>" / "r:<id>" -> ms staged
-- KEYS[2] -> staged HASH "l:<id>" -> a leaf's send, "r:<id>" -> a record's flow
-- KEYS[3] -> msg HASH (a leaf's id that exists there is refused)
-- KEYS[4] -> wake channel: "T" tells the slot's consumers to scan it
--            for flow work (a writer that dies leaves its staging there)
-- KEYS[4+j] -> the record HASH of the j-th parent below
-- ARGV[1] -> wake command: PUBLISH, SPUBLISH or ''
-- ARGV[2] -> the flow's nonce (fid)
-- ARGV[3] -> the root's ref: "<slot>\n<topic>\n<id>"
-- ARGV[4] -> P parents, ARGV[5] -> L leaves, then
--   per parent: id, type, score, options, body, up (its own parent's ref,
--     '' for the root), n, then n child descriptors ("<F|C><slot>\n<topic>\n<id>")
--   per leaf: id, type, score, options, body, up
-- A score of 0 for a fixed-time node means "now" (Redis's clock).
-- Returns: { 1 } staged (a rerun of the same flow changes nothing), or
-- { -1, id } when id is taken: a record of another flow exists for a
-- parent, or a leaf's id has an envelope (waiting or in flight) here;
-- then nothing of this call was written.
local cmd, fid, root = ARGV[1], ARGV[2], ARGV[3]
local P, L = tonumber(ARGV[4]), tonumber(ARGV[5])
local parents, leaves = {}, {}
local at = 6
for j = 1, P do
  local n = tonumber(ARGV[at + 6])
  parents[j] = { id = ARGV[at], typ = tonumber(ARGV[at + 1]), score = ARGV[at + 2], opts = ARGV[at + 3], body = ARGV[at + 4], up = ARGV[at + 5], n = n, kids = at + 7 }
  at = at + 7 + n
end
for j = 1, L do
  leaves[j] = { id = ARGV[at], typ = ARGV[at + 1], score = ARGV[at + 2], opts = ARGV[at + 3], body = ARGV[at + 4], up = ARGV[at + 5] }
  at = at + 6
end
-- Check everything before the first write.
for j = 1, P do
  local cur = redis.call('HGET', KEYS[4 + j], 'fid')
  if cur and cur ~= fid then return { -1, parents[j].id } end
end
for j = 1, L do
  if redis.call('HEXISTS', KEYS[3], leaves[j].id) == 1 and redis.call('HGET', KEYS[2], 'l:' .. leaves[j].id) == false then
    return { -1, leaves[j].id }
  end
end
local now = now_ms()
for j = 1, P do
  local p = parents[j]
  local rec = KEYS[4 + j]
  if redis.call('EXISTS', rec) == 0 then
    local e = { typ = p.typ, fails = 0, first = now, nonce = tonumber(fid), err = '' }
    if p.opts ~= '' then opt_decode(e, p.opts) end
    e.score = tonumber(p.score)
    if e.typ == 3 and e.score == 0 then e.score = now end
    e.orig = e.score
    local f = { 'env', env_encode(e, p.body), 'id', p.id, 'n', p.n, 'd', 0, 'up', p.up, 'fid', fid, 'root', root, 'stg', fid }
    for i = 1, p.n do
      f[#f + 1] = 'k' .. i
      f[#f + 1] = ARGV[p.kids + i - 1]
    end
    mcall('HSET', rec, f, 2)
    redis.call('HSET', KEYS[2], 'r:' .. p.id, fid .. '\n' .. root)
    redis.call('ZADD', KEYS[1], now, 'r:' .. p.id)
  end
end
for j = 1, L do
  local l = leaves[j]
  local v = struct.pack('>I4', #fid) .. fid .. struct.pack('>I4', #root) .. root .. struct.pack('>I4', #l.typ) .. l.typ ..
    struct.pack('>I4', #l.score) .. l.score .. struct.pack('>I4', #l.opts) .. l.opts .. struct.pack('>I4', #l.up) .. l.up .. l.body
  redis.call('HSET', KEYS[2], 'l:' .. l.id, v)
  redis.call('ZADD', KEYS[1], 'NX', now, 'l:' .. l.id)
end
if cmd ~= '' then redis.call(cmd, KEYS[4], 'T') end
return { 1 }
