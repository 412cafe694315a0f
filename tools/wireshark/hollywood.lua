-- Wireshark dissector for TCP Hollywood's message framing, version 1
-- (docs/PROTOCOL.md): 0x00 || COBS(header || payload || CRC32C) || 0x00.
--
--   tshark -X lua_script:tools/wireshark/hollywood.lua \
--          -d tcp.port==80,hollywood -r capture.pcap
--
-- Each message shows its header fields and whether its CRC32C holds; its
-- payload goes to the HTTP/2 dissector when it is whole HTTP/2 frames (the
-- connection preface included), to the HTTP dissector when it starts with
-- an HTTP/1.x request or status line, else it is shown as data. Without
-- -d, the heuristic finds a stream whose first segment starts a valid
-- frame (add -o tcp.try_heuristic_first:TRUE for ports another dissector
-- owns, such as 80).
--
-- Ours, written from docs/PROTOCOL.md; Wireshark's Lua API only.

local hw = Proto("hollywood", "TCP Hollywood message framing")

local F = hw.fields
F.version = ProtoField.uint8("hollywood.version", "Version", base.DEC)
F.ordered = ProtoField.bool("hollywood.flags.ordered", "Ordered")
F.seqflag = ProtoField.bool("hollywood.flags.seq", "Sub-stream sequence number present")
F.substream = ProtoField.uint16("hollywood.substream", "Sub-stream", base.DEC)
F.id = ProtoField.uint32("hollywood.id", "Message id", base.DEC)
F.seq = ProtoField.uint32("hollywood.seq", "Sub-stream sequence number", base.DEC)
F.prev = ProtoField.uint32("hollywood.prev", "Previous id", base.DEC)
F.len = ProtoField.uint32("hollywood.payload_len", "Payload length", base.DEC)
F.crc = ProtoField.uint32("hollywood.crc", "CRC32C", base.HEX)
F.crc_ok = ProtoField.bool("hollywood.crc_ok", "CRC32C correct")
F.padding = ProtoField.uint32("hollywood.padding", "Zero bytes (markers and padding)", base.DEC)
F.error = ProtoField.string("hollywood.error", "Not a message")

local http2 = Dissector.get("http2")
local http = Dissector.get("http")
local data = Dissector.get("data")

-- Bit operations: Lua 5.2's bit32, or 5.3+'s operators (loaded as text so
-- that a 5.2 parser never sees them).
local band, bxor, rshift
if bit32 then
    band, bxor, rshift = bit32.band, bit32.bxor, bit32.rshift
else
    band = load("return function(a, b) return a & b end")()
    bxor = load("return function(a, b) return (a ~ b) & 0xffffffff end")()
    rshift = load("return function(a, n) return (a & 0xffffffff) >> n end")()
end

-- CRC32C (Castagnoli, reflected polynomial 0x82f63b78), table-driven.
local CRC = {}
for i = 0, 255 do
    local c = i
    for _ = 1, 8 do
        if band(c, 1) == 1 then
            c = bxor(rshift(c, 1), 0x82f63b78)
        else
            c = rshift(c, 1)
        end
    end
    CRC[i] = c
end

local function crc32c(s, from, to)
    local c = 0xffffffff
    local byte = string.byte
    for i = from, to do
        c = bxor(CRC[band(bxor(c, byte(s, i)), 0xff)], rshift(c, 8))
    end
    return bxor(c, 0xffffffff)
end

-- COBS-decode s[from..to] (no zero bytes in it); nil if malformed.
local function cobs_decode(s, from, to)
    local out, n = {}, 0
    local i = from
    local byte, sub = string.byte, string.sub
    while i <= to do
        local code = byte(s, i)
        local last = i + code - 1
        if last > to then
            return nil
        end
        n = n + 1
        out[n] = sub(s, i + 1, last)
        i = last + 1
        if code < 255 and i <= to then
            n = n + 1
            out[n] = "\0"
        end
    end
    return table.concat(out)
end

local function u16(s, i)
    local a, b = string.byte(s, i, i + 1)
    return a * 256 + b
end

local function u32(s, i)
    local a, b, c, d = string.byte(s, i, i + 3)
    return ((a * 256 + b) * 256 + c) * 256 + d
end

-- Whether p is whole HTTP/2 frames (after an optional client preface).
local PREFACE = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
local function is_http2(p)
    local i = 1
    if string.sub(p, 1, #PREFACE) == PREFACE then
        i = #PREFACE + 1
    end
    local n = #p
    if i > n then
        return i > 1
    end
    while i + 8 <= n do
        local a, b, c, kind = string.byte(p, i, i + 3)
        if kind > 9 then
            return false
        end
        i = i + 9 + (a * 256 + b) * 256 + c
    end
    return i == n + 1
end

local function is_http1(p)
    return string.find(p, "^%u+ [^ ]+ HTTP/1%.%d\r\n") ~= nil
        or string.find(p, "^HTTP/1%.%d %d%d%d") ~= nil
end

-- Parse one decoded body; returns a table of fields or nil, why.
local function parse_body(b)
    local n = #b
    if n < 11 then
        return nil, "body of " .. n .. " bytes (at least 11)"
    end
    local want = u32(b, n - 3)
    local got = crc32c(b, 1, n - 4)
    local first = string.byte(b, 1)
    local m = {
        version = math.floor(first / 16),
        flags = first % 16,
        crc = want,
        crc_ok = want == got,
    }
    -- The header's length from its flags first: 7, 11 or 15 bytes.
    local header = 7
    if m.flags % 4 >= 2 then
        header = header + 4
    end
    if m.flags % 2 == 1 then
        header = header + 4
    end
    if header + 4 > n then
        return nil, "header and CRC longer than the body"
    end
    m.substream = u16(b, 2)
    m.id = u32(b, 4)
    local at = 8
    if m.flags % 4 >= 2 then
        m.seq = u32(b, at)
        at = at + 4
    end
    if m.flags % 2 == 1 then
        m.prev = u32(b, at)
        at = at + 4
    end
    m.payload_from, m.payload_to = at, n - 4
    return m
end

local function dissect_message(body_tvb, b, pinfo, tree, range)
    local t = tree:add(hw, range)
    local m, why = parse_body(b)
    if not m then
        t:add(F.error, why)
        return
    end
    t:add(F.version, range, m.version)
    t:add(F.ordered, range, m.flags % 2 == 1)
    t:add(F.seqflag, range, m.flags % 4 >= 2)
    t:add(F.substream, body_tvb(1, 2))
    t:add(F.id, body_tvb(3, 4))
    if m.seq then
        t:add(F.seq, body_tvb(7, 4))
    end
    if m.prev then
        t:add(F.prev, body_tvb(m.payload_from - 5, 4))
    end
    local plen = m.payload_to - m.payload_from + 1
    t:add(F.len, range, plen)
    t:add(F.crc, body_tvb(#b - 4, 4))
    local ok = t:add(F.crc_ok, range, m.crc_ok)
    t:append_text(string.format(", sub-stream %d, id %d, %d bytes", m.substream, m.id, plen))
    if not m.crc_ok then
        ok:add_expert_info(PI_CHECKSUM, PI_WARN, "CRC32C mismatch: corrupt or spliced (thesis §4.5)")
        return
    end
    if plen == 0 then
        return
    end
    local payload = string.sub(b, m.payload_from, m.payload_to)
    local ptvb = body_tvb(m.payload_from - 1, plen):tvb()
    if is_http2(payload) then
        http2:call(ptvb, pinfo, tree)
    elseif is_http1(payload) then
        http:call(ptvb, pinfo, tree)
    else
        data:call(ptvb, pinfo, tree)
    end
end

function hw.dissector(tvb, pinfo, tree)
    local n = tvb:len()
    if n == 0 then
        return 0
    end
    pinfo.cols.protocol = "Hollywood"
    local s = tvb:raw()
    local i = 1
    local zeros = 0
    while i <= n do
        local first = string.find(s, "[^%z]", i)
        if not first then
            zeros = zeros + (n - i + 1)
            break
        end
        zeros = zeros + (first - i)
        local stop = string.find(s, "\0", first, true)
        if not stop then
            -- The frame goes on in the next segment.
            pinfo.desegment_offset = first - 1
            pinfo.desegment_len = DESEGMENT_ONE_MORE_SEGMENT
            break
        end
        local body = cobs_decode(s, first, stop - 1)
        local range = tvb(first - 1, stop - first)
        if body then
            local btvb = ByteArray.new(body, true):tvb("Hollywood message")
            dissect_message(btvb, body, pinfo, tree, range)
        else
            tree:add(hw, range):add(F.error, "malformed COBS")
        end
        i = stop
    end
    if zeros > 0 then
        tree:add(hw, tvb(0, 0)):add(F.padding, zeros)
    end
    return n
end

-- A stream is ours when its first bytes are 0x00 and a COBS frame whose
-- CRC32C holds.
local function heuristic(tvb, pinfo, tree)
    if tvb:len() < 14 then
        return false
    end
    local s = tvb:raw()
    if string.byte(s, 1) ~= 0 then
        return false
    end
    local first = string.find(s, "[^%z]", 1)
    local stop = first and string.find(s, "\0", first, true)
    if not stop then
        return false
    end
    local body = cobs_decode(s, first, stop - 1)
    local m = body and parse_body(body)
    if not (m and m.crc_ok and m.version == 1) then
        return false
    end
    hw.dissector(tvb, pinfo, tree)
    pinfo.conversation = hw
    return true
end

DissectorTable.get("tcp.port"):add_for_decode_as(hw)
hw:register_heuristic("tcp", heuristic)
