-- inferstack inference cache, run by the gateway (nginx + Debian's libnginx-mod-http-lua) in front of the runtime.
--
-- Deterministic requests (temperature 0 completions, embeddings, classification, Triton inference of
-- non-generative models) are answered from Redis (lua-nginx-redis, `nginx.redis`, over TLS with AUTH) when the
-- same scope (server group, model revision, serving and runtime build) was asked the same request within the TTL.
-- Everything else, streamed answers included, goes to the runtime untouched. A miss, a Redis error or a Redis outage
-- never fails a request: the runtime answers, and the outcome is counted (`stats`, the access log's cache= field; a
-- client is never told).
--
-- The key is the scope and the SHA-1 of the request's exact canonical JSON (below); the value holds that canonical
-- request too, and a hit whose stored request differs is served as a miss, so that two requests with the same SHA-1
-- never share an answer.
--
-- All of it runs in nginx's event loop, where every other request of the worker waits meanwhile: only a body whose
-- Content-Length is at most `max_request_bytes` is ever read, a long parse yields to the loop every YIELD_BYTES, and
-- only answers of at most MAX_STORED_BYTES are kept.

local cjson = require("cjson.safe")
local redis = require("nginx.redis")

local _M = {}

local settings = nil  -- set once in the master (init_by_lua), inherited by the workers
local MAX_STORED_BYTES = 1048576  -- answers larger than this are not cached
local TIMEOUT_MS = 500  -- connect, send and read: a slow Redis costs a request at most this much per step
local POOL_SIZE = 32
local POOL_IDLE_MS = 60000
local MAX_DEPTH = 64  -- deeper JSON is not keyed (the runtime answers it)
local YIELD_BYTES = 65536  -- the parse gives the event loop a turn after this much input

-- conf: scope, ttl_seconds, max_request_bytes, host, port, tls (bool), server_name, verify (bool), auth_file, paths
-- (prefixes of deterministic routes), completions (routes deterministic at temperature 0).
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

--#### Canonical JSON ####
-- The request as exact text: two requests get one text only when they are the same JSON value to every runtime.
-- Debian's lua-cjson 2.1.0 cannot give that: it decodes every number to a double (2^53 + 1 becomes 2^53), encodes
-- at most 14 significant digits, decodes [] and {} to the same empty table, keeps the last of duplicate keys and
-- reads NaN, Infinity and hexadecimal numbers by default (its manual, kyne.au/~mark/software/lua-cjson-manual.html,
-- read 2026-12-07; OpenResty's fork has decode_array_with_array_mt, Debian's has not). So the body is scanned here,
-- strictly (RFC 8259), into:
--   numbers   as written (1 and 1.0 are an int and a float to a Python runtime; 1.0 and 1.00 two keys, never one);
--   strings   unescaped, then written one way ('"' and '\' escaped, controls and lone surrogates as \u00xx/\udxxx);
--   objects   members sorted by key; a duplicate key is not keyed at all ("the behavior of software that receives
--             such an object is unpredictable", RFC 8259 section 4: Python's json keeps the last, others the first);
--   arrays    as they are, so [] and {} differ;
--   NaN, Infinity, -Infinity and numbers beyond a double's range are refused (the caller answers 400).
-- A scan returns nil and why where the body is not JSON it keys (the runtime answers it unkeyed).

local NOT_KEYED = {}  -- a reason: JSON this scan does not key (invalid, a duplicate key, too deep)

local function hex4(text, at)
    local digits = text:match("^%x%x%x%x", at)
    return digits and tonumber(digits, 16)
end

local function utf8(code)
    if code < 0x80 then return string.char(code) end
    if code < 0x800 then return string.char(0xC0 + math.floor(code / 0x40), 0x80 + code % 0x40) end
    if code < 0x10000 then
        return string.char(0xE0 + math.floor(code / 0x1000), 0x80 + math.floor(code / 0x40) % 0x40, 0x80 + code % 0x40)
    end
    return string.char(0xF0 + math.floor(code / 0x40000), 0x80 + math.floor(code / 0x1000) % 0x40,
                       0x80 + math.floor(code / 0x40) % 0x40, 0x80 + code % 0x40)
end

local SHORT_ESCAPES = {['"'] = 0x22, ["\\"] = 0x5C, ["/"] = 0x2F, b = 0x08, f = 0x0C, n = 0x0A, r = 0x0D, t = 0x09}

local function written(code)  -- one code point of an unescaped string, written the canonical way
    if code == 0x22 then return '\\"' end
    if code == 0x5C then return "\\\\" end
    if code < 0x20 or (code >= 0xD800 and code <= 0xDFFF) then return string.format("\\u%04x", code) end
    return utf8(code)
end

-- The canonical text of the string whose escaped content is `inner`, or nil when an escape is invalid.
local function canonical_string(inner)
    if not inner:find("\\", 1, true) then return '"' .. inner .. '"' end
    local parts, at = {}, 1
    while true do
        local slash = inner:find("\\", at, true)
        if not slash then break end
        parts[#parts + 1] = inner:sub(at, slash - 1)
        local kind = inner:sub(slash + 1, slash + 1)
        local code = SHORT_ESCAPES[kind]
        at = slash + 2
        if kind == "u" then
            code = hex4(inner, at)
            if not code then return nil end
            at = at + 4
            local low = code >= 0xD800 and code <= 0xDBFF and inner:sub(at, at + 1) == "\\u" and hex4(inner, at + 2)
            if low and low >= 0xDC00 and low <= 0xDFFF then  -- a surrogate pair: one code point
                code = 0x10000 + (code - 0xD800) * 0x400 + (low - 0xDC00)
                at = at + 6
            end
        end
        if not code then return nil end
        parts[#parts + 1] = written(code)
    end
    parts[#parts + 1] = inner:sub(at)
    return '"' .. table.concat(parts) .. '"'
end

local NON_FINITE_WORDS = {"NaN", "Infinity", "-Infinity"}
local LITERALS = {[116] = "true", [102] = "false", [110] = "null"}  -- by their first byte

-- A scan of `text`: returns (canonical text, top-level members by canonical key) or (nil, reason), where reason is
-- NOT_KEYED or {path = "...", value = "..."} for a non-finite number.
local function scan(text)
    local at, depth, next_yield = 1, 0, YIELD_BYTES
    local path = {}  -- keys and indexes down to the value being scanned, for the error's field
    local value  -- forward declaration: values nest

    local function skip_space()
        at = text:find("[^ \t\n\r]", at) or #text + 1
    end

    local function refuse(lexeme)
        local field = {}
        for i, step in ipairs(path) do
            field[#field + 1] = type(step) == "number" and ("[" .. step .. "]") or ((i > 1 and "." or "") .. step)
        end
        local where = table.concat(field):sub(1, 80)
        error({path = where ~= "" and where or "the body", value = lexeme:sub(1, 40)}, 0)
    end

    local function number()
        local first, last = text:find("^-?%d+", at)
        if not first then
            for _, word in ipairs(NON_FINITE_WORDS) do
                if text:sub(at, at + #word - 1) == word then refuse(word) end
            end
            error(NOT_KEYED, 0)
        end
        local lead = text:byte(first) == 45 and first + 1 or first  -- after a minus
        if text:byte(lead) == 48 and last > lead then error(NOT_KEYED, 0) end  -- a leading zero
        local float = false
        if text:byte(last + 1) == 46 then  -- .
            local fraction = text:match("^%.%d+", last + 1) or error(NOT_KEYED, 0)
            last, float = last + #fraction, true
        end
        local after = text:byte(last + 1)
        if after == 101 or after == 69 then  -- e or E
            local exponent = text:match("^[eE][-+]?%d+", last + 1) or error(NOT_KEYED, 0)
            last, float = last + #exponent, true
        end
        local lexeme = text:sub(at, last)
        -- only a float or an integer of over 300 digits can be beyond a double's range
        if (float or last - first > 300) and math.abs(tonumber(lexeme)) == math.huge then refuse(lexeme) end
        at = last + 1
        return lexeme
    end

    local function string_value()
        local close = at
        repeat  -- the closing quote: the first one after an even run of backslashes
            close = text:find('"', close + 1, true)
            if not close then error(NOT_KEYED, 0) end
            local slashes = close - 1
            while text:byte(slashes) == 92 do slashes = slashes - 1 end
        until (close - 1 - slashes) % 2 == 0
        local inner = text:sub(at + 1, close - 1)
        if inner:find("[%z\1-\31]") then error(NOT_KEYED, 0) end  -- a raw control character
        at = close + 1
        return canonical_string(inner) or error(NOT_KEYED, 0)
    end

    local function array()
        local parts, index = {}, 0
        at = at + 1
        skip_space()
        if text:byte(at) == 93 then at = at + 1 return "[]" end  -- ]
        while true do
            index = index + 1
            path[depth] = index - 1
            parts[index] = value()
            skip_space()
            local byte = text:byte(at)
            at = at + 1
            if byte == 93 then return "[" .. table.concat(parts, ",") .. "]" end
            if byte ~= 44 then error(NOT_KEYED, 0) end  -- ,
        end
    end

    local function object(top)
        local members, keys = {}, {}
        at = at + 1
        skip_space()
        if text:byte(at) == 125 then at = at + 1 return "{}", members end  -- }
        while true do
            skip_space()
            if text:byte(at) ~= 34 then error(NOT_KEYED, 0) end  -- "
            local key = string_value()
            if members[key] then error(NOT_KEYED, 0) end  -- a duplicate key
            path[depth] = key:sub(2, -2)
            skip_space()
            if text:byte(at) ~= 58 then error(NOT_KEYED, 0) end  -- :
            at = at + 1
            members[key] = value()
            keys[#keys + 1] = key
            skip_space()
            local byte = text:byte(at)
            at = at + 1
            if byte == 125 then break end
            if byte ~= 44 then error(NOT_KEYED, 0) end
        end
        table.sort(keys)
        local parts = {}
        for i, key in ipairs(keys) do parts[i] = key .. ":" .. members[key] end
        return "{" .. table.concat(parts, ",") .. "}", top and members or nil
    end

    value = function(top)
        if at > next_yield then  -- a long body: let the worker's other requests (the health path's) run
            ngx.sleep(0.001)  -- not 0: without OpenResty's delayed-events patch (Debian) that warns at every call
            next_yield = at + YIELD_BYTES
        end
        skip_space()
        local byte = text:byte(at)
        if byte == 123 or byte == 91 then  -- { or [
            depth = depth + 1
            if depth > MAX_DEPTH then error(NOT_KEYED, 0) end
            local canonical, members
            if byte == 123 then canonical, members = object(top) else canonical = array() end
            path[depth] = nil
            depth = depth - 1
            return canonical, members
        end
        if byte == 34 then return string_value() end
        local word = LITERALS[byte]
        if word then
            if text:sub(at, at + #word - 1) ~= word then error(NOT_KEYED, 0) end
            at = at + #word
            return word
        end
        return number()
    end

    local ok, canonical, members = pcall(function()
        local canonical, members = value(true)
        skip_space()
        if at <= #text then error(NOT_KEYED, 0) end  -- anything after the value
        return canonical, members
    end)
    if not ok then
        if type(canonical) ~= "table" then error(canonical, 0) end  -- a bug, not the body: let nginx log it
        return nil, canonical
    end
    return canonical, members
end

--#### Requests ####

local function starts_with(text, prefix)
    return text:sub(1, #prefix) == prefix
end

-- Routes whose requests the cache reads: the completion routes (deterministic at temperature 0) and the
-- deterministic prefixes.
local function read_route(uri)
    for _, path in ipairs(settings.completions) do
        if uri == path then return "completion" end
    end
    for _, prefix in ipairs(settings.paths) do
        if starts_with(uri, prefix) then return "deterministic" end
    end
    return nil
end

-- members: the top-level object's members, by canonical key, as canonical text (numbers as written).
local function deterministic(route, members)
    if not members or members['"stream"'] == "true" then return false end
    if route == "deterministic" then return true end
    local n = members['"n"']
    return tonumber(members['"temperature"']) == 0 and (n == nil or tonumber(n) == 1)
end

-- The body when the cache may read it: a length given and at most the cap, held in memory.
local function small_body()
    local length = tonumber(ngx.var.http_content_length)
    if not length or length > settings.max_request_bytes or ngx.var.http_transfer_encoding then return nil end
    ngx.req.read_body()
    return ngx.req.get_body_data()  -- nil for a body in a file: never, within client_body_buffer_size
end

local function refuse_non_finite(problem)
    ngx.var.inferstack_cache = "REFUSED"
    ngx.status = ngx.HTTP_BAD_REQUEST
    ngx.header["Content-Type"] = "application/json"
    ngx.print(cjson.encode({error = {
        message = "request body: " .. problem.path .. " is " .. problem.value .. ", which is not a finite number "
                  .. "(JSON has no NaN or Infinity, and a double holds at most 1.8e308): send a finite number",
        type = "invalid_request_error", param = problem.path}}))
    return ngx.exit(ngx.HTTP_OK)
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
    local route = read_route(ngx.var.uri)
    if not route then return end
    local body = small_body()
    if not body then return end
    local canonical, members = scan(body)
    if not canonical then
        if members ~= NOT_KEYED then return refuse_non_finite(members) end
        return
    end
    if not deterministic(route, members) then return end
    local normalised = ngx.var.uri .. " " .. canonical
    local key = "inferstack:" .. settings.scope .. ":" .. ngx.encode_base64(ngx.sha1_bin(normalised))
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
    ngx.header["Content-Type"] = entry.content_type
    ngx.header["Content-Length"] = #entry.body  -- as the runtime's answer has it: a hit looks like a miss
    ngx.print(entry.body)
    return ngx.exit(200)
end

--#### Answers ####
-- Only the body and its Content-Type are stored, so an answer is kept only where nothing else of its headers
-- matters: a 200 of JSON, not encoded (Content-Encoding: a client's gzip is not every client's; Triton compresses
-- for a client that accepts it, docs.nvidia.com/deeplearning/triton-inference-server/user-guide/docs/
-- customization_guide/inference_protocols.html "HTTP Compression", read 2026-12-07, and the gateway sends no
-- Accept-Encoding), whole (no Content-Range), for anyone (no Set-Cookie; no Cache-Control private or no-store), not
-- negotiated (Vary names no request header but Origin, which selects only CORS headers, never stored:
-- llama-cpp-python's CORS middleware says Vary: Origin on every answer; or Accept-Encoding, never sent upstream),
-- and not a Triton binary tensor answer (its binary data follows the JSON, whose length is the
-- Inference-Header-Content-Length header: .../user-guide/docs/protocol/extension_binary_data.html, read 2026-12-07).

local MEANINGFUL_HEADERS = {"content-range", "set-cookie", "inference-header-content-length"}
local HARMLESS_VARY = {origin = true, ["accept-encoding"] = true}

local function header_text(headers, name)  -- a header's value(s), lowercase; "" when absent
    local value = headers[name] or ""
    return (type(value) == "table" and table.concat(value, ",") or value):lower()
end

local function storable(headers)
    if ngx.status ~= 200 then return false end
    local encoding = header_text(headers, "content-encoding")
    if encoding ~= "" and encoding ~= "identity" then return false end
    if header_text(headers, "content-type"):match("^%s*([^;%s]+)") ~= "application/json" then return false end
    for _, name in ipairs(MEANINGFUL_HEADERS) do
        if headers[name] then return false end
    end
    for varied in header_text(headers, "vary"):gmatch("[^,%s]+") do
        if not HARMLESS_VARY[varied] then return false end
    end
    local control = header_text(headers, "cache-control")
    if control:find("no-store", 1, true) or control:find("private", 1, true) then return false end
    local length = tonumber(header_text(headers, "content-length"))
    return not length or length <= MAX_STORED_BYTES
end

-- header filter: decide from the answer's headers whether it is kept.
function _M.header()
    local pending = ngx.ctx.inferstack_cache
    if pending and not storable(ngx.resp.get_headers()) then ngx.ctx.inferstack_cache = nil end
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
