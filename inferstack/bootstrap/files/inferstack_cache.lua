-- inferstack inference cache, run by the gateway (nginx + Debian's libnginx-mod-http-lua) in front of the runtime.
--
-- Deterministic requests (temperature 0 completions, embeddings, classification, Triton inference of
-- non-generative models) are answered from Redis (lua-nginx-redis, `nginx.redis`, over TLS with AUTH) when the
-- same model revision was asked the same normalised request within the TTL. Everything else, streamed answers
-- included, goes to the runtime untouched. A miss, a Redis error or a Redis outage never fails a request: the
-- runtime answers, and the outcome is counted (`stats`, the access log's cache= field).
--
-- The key is the revision and the SHA-1 of the normalised request (JSON with sorted keys); the value holds that
-- normalised request too, and a hit whose stored request differs is served as a miss, so that two requests
-- with the same SHA-1 never share an answer.

local cjson = require("cjson.safe")
local redis = require("nginx.redis")

local _M = {}

local settings = nil  -- set once in the master (init_by_lua), inherited by the workers
local MAX_STORED_BYTES = 1048576  -- answers larger than this are not cached
local TIMEOUT_MS = 500  -- connect, send and read: a slow Redis costs a request at most this much per step
local POOL_SIZE = 32
local POOL_IDLE_MS = 60000

-- conf: revision, ttl_seconds, host, port, tls (bool), server_name, verify (bool), auth_file, paths (prefixes of
-- deterministic routes), completions (routes deterministic at temperature 0).
function _M.init(conf)
    local auth = nil
    local file = io.open(conf.auth_file, "r")  -- root-only; read by the master before it drops privileges
    if file then
        for line in file:lines() do
            local value = line:match("^[A-Z_]+=(.+)$")
            if value then auth = value end
        end
        file:close()
    end
    if not auth then
        ngx.log(ngx.WARN, "inferstack cache: no auth token in ", conf.auth_file, "; the cache is off")
    end
    conf.auth = auth
    settings = conf
end

local function count(what)
    local stats = ngx.shared.inferstack_cache_stats
    if stats then stats:incr(what, 1, 0) end
end

local function is_array(value)
    local n = #value
    for key in pairs(value) do
        if type(key) ~= "number" or key < 1 or key > n or key % 1 ~= 0 then return false end
    end
    return n > 0
end

-- JSON with object keys sorted, so that key order and whitespace do not make two requests differ.
local function canonical(value)
    if type(value) ~= "table" then return cjson.encode(value) end
    local parts = {}
    if is_array(value) then
        for i = 1, #value do parts[i] = canonical(value[i]) end
        return "[" .. table.concat(parts, ",") .. "]"
    end
    local keys = {}
    for key in pairs(value) do keys[#keys + 1] = tostring(key) end
    table.sort(keys)
    for i, key in ipairs(keys) do parts[i] = cjson.encode(key) .. ":" .. canonical(value[key]) end
    return "{" .. table.concat(parts, ",") .. "}"
end

local function starts_with(text, prefix)
    return text:sub(1, #prefix) == prefix
end

local function deterministic(uri, request)
    if type(request) ~= "table" or request.stream == true then return false end
    for _, path in ipairs(settings.completions) do
        if uri == path then
            return request.temperature == 0 and (request.n == nil or request.n == 1)
        end
    end
    for _, prefix in ipairs(settings.paths) do
        if starts_with(uri, prefix) then return true end
    end
    return false
end

local function request_body()
    ngx.req.read_body()
    local body = ngx.req.get_body_data()
    if body then return body end
    local path = ngx.req.get_body_file()  -- a body larger than client_body_buffer_size
    if not path then return nil end
    local file = io.open(path, "rb")
    if not file then return nil end
    body = file:read("*a")
    file:close()
    return body
end

local function connect()
    local client = redis:new()
    client:set_timeout(TIMEOUT_MS)
    local ok, err = client:connect(settings.host, settings.port)
    if not ok then return nil, "connect: " .. tostring(err) end
    if client:get_reused_times() == 0 then
        if settings.tls then
            -- lua-nginx-redis 0.27 (Debian 12) has no TLS option of its own: the handshake runs on its cosocket.
            local sock = rawget(client, "_sock")
            local session, tls_err = sock:sslhandshake(nil, settings.server_name, settings.verify)
            if not session then return nil, "tls: " .. tostring(tls_err) end
        end
        local authorised, auth_err = client:auth(settings.auth)
        if not authorised then return nil, "auth: " .. tostring(auth_err) end
    end
    return client
end

local function release(client)
    client:set_keepalive(POOL_IDLE_MS, POOL_SIZE)
end

-- access phase: answer a deterministic request from Redis, or remember its key for the response.
function _M.lookup()
    ngx.var.inferstack_cache = "BYPASS"
    if not settings or not settings.auth or ngx.req.get_method() ~= "POST" then return end
    local body = request_body()
    if not body then return end
    local request = cjson.decode(body)
    if not deterministic(ngx.var.uri, request) then return end
    local normalised = ngx.var.uri .. " " .. canonical(request)
    local key = "inferstack:" .. settings.revision .. ":" .. ngx.encode_base64(ngx.sha1_bin(normalised))
    ngx.ctx.inferstack_cache = {key = key, normalised = normalised, chunks = {}, size = 0}
    ngx.var.inferstack_cache = "MISS"
    local client, err = connect()
    if not client then
        count("errors")
        ngx.var.inferstack_cache = "ERROR"
        ngx.log(ngx.WARN, "inferstack cache: redis unavailable, the runtime answers: ", err)
        return
    end
    local stored, get_err = client:get(key)
    if get_err then
        count("errors")
        ngx.var.inferstack_cache = "ERROR"
        ngx.log(ngx.WARN, "inferstack cache: redis GET failed, the runtime answers: ", get_err)
        return
    end
    release(client)
    local entry = stored ~= ngx.null and cjson.decode(stored) or nil
    if type(entry) ~= "table" or entry.request ~= normalised or type(entry.body) ~= "string" then
        count("misses")
        return
    end
    count("hits")
    ngx.ctx.inferstack_cache = nil
    ngx.var.inferstack_cache = "HIT"
    ngx.status = 200
    ngx.header["Content-Type"] = entry.content_type or "application/json"
    ngx.header["X-Inferstack-Cache"] = "HIT"
    ngx.print(entry.body)
    return ngx.exit(200)
end

-- header filter: only a 200 answer is kept.
function _M.header()
    local pending = ngx.ctx.inferstack_cache
    if not pending then return end
    ngx.header["X-Inferstack-Cache"] = "MISS"
    if ngx.status ~= 200 then ngx.ctx.inferstack_cache = nil end
end

local function store(premature, key, value, ttl)
    if premature then return end
    local client, err = connect()
    if not client then
        count("errors")
        ngx.log(ngx.WARN, "inferstack cache: answer not stored: ", err)
        return
    end
    local ok, set_err = client:set(key, value, "EX", ttl)
    if not ok then
        count("errors")
        ngx.log(ngx.WARN, "inferstack cache: answer not stored: ", set_err)
        return
    end
    count("stores")
    release(client)
end

-- body filter: collect the answer as it passes (unchanged) and store it once complete, after the response.
function _M.body()
    local pending = ngx.ctx.inferstack_cache
    if not pending then return end
    local chunk, eof = ngx.arg[1], ngx.arg[2]
    pending.size = pending.size + #chunk
    if pending.size > MAX_STORED_BYTES then
        ngx.ctx.inferstack_cache = nil
        return
    end
    pending.chunks[#pending.chunks + 1] = chunk
    if not eof then return end
    ngx.ctx.inferstack_cache = nil
    local value = cjson.encode({request = pending.normalised, body = table.concat(pending.chunks),
                                content_type = ngx.header["Content-Type"]})
    -- cosockets are not allowed in a body filter: a zero-delay timer stores the answer.
    local ok, err = ngx.timer.at(0, store, pending.key, value, settings.ttl_seconds)
    if not ok then
        count("errors")
        ngx.log(ngx.WARN, "inferstack cache: cannot schedule the store: ", err)
    end
end

-- the loopback status endpoint: counters since nginx started, as JSON.
function _M.stats()
    local stats = ngx.shared.inferstack_cache_stats
    local result = {}
    for _, name in ipairs({"hits", "misses", "errors", "stores"}) do result[name] = stats:get(name) or 0 end
    local lookups = result.hits + result.misses
    result.hit_rate = lookups > 0 and result.hits / lookups or 0
    ngx.header["Content-Type"] = "application/json"
    ngx.say(cjson.encode(result))
end

return _M
