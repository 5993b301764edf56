-- wrk script for the MCP 2026-07-28 HTTP bench (labkit and the SDK server answer the same).
--
--   wrk -t1 -c8 -d3s -s bench/mcp.lua http://127.0.0.1:PORT/mcp -- list
--   wrk -t1 -c8 -d3s -s bench/mcp.lua http://127.0.0.1:PORT/mcp -- delete
--   wrk -t1 -c8 -d3s -s bench/mcp.lua http://127.0.0.1:PORT/mcp -- flow
--
-- list:   every request is the same tools/list POST.
-- delete: the full two-round notes_delete flow. A round one searches for the title of exactly
--         one note this thread has reserved ("bench-t<thread>-note <k>"); its input_required
--         answer is queued, and the next free connection of the thread sends the accept retry
--         with the byte-exact requestState. The note stays reserved until the retry's answer
--         arrives, so two flows never race for one note and every retry is a real deletion
--         (the servers' bench stores re-create a deleted note under a new identity).
-- flow:   round one of notes_delete for the demo title "tps" (input_required with a form and a
--         requestState), then the cancel retry with the byte-exact requestState (deletes
--         nothing; answers status "cancelled"). Retries go out before new round ones.
-- Every reply is checked: a status other than 200 or a body without what its request must
-- answer counts as unexpected, and bench_http.py fails the run when any is.
-- done() prints one "key value" line per figure for bench_http.py to read.

local threads = {}
local counter = 0

function setup(thread)
   thread:set("tid", counter)
   counter = counter + 1
   table.insert(threads, thread)
end

local NOTES_PER_THREAD = 16
local META = '"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28",'
   .. '"io.modelcontextprotocol/clientCapabilities":{"elicitation":{"form":{}}},'
   .. '"io.modelcontextprotocol/clientInfo":{"name":"labkit-bench","version":"0"}}'

local mode, path, list_request
local free, pending = {}, {}
local next_id = 0
deleted, unexpected, rounds, cancelled = 0, 0, 0, 0

local function headers(method, name)
   local h = {
      ["Content-Type"] = "application/json",
      ["Accept"] = "application/json, text/event-stream",
      ["Authorization"] = "Bearer demo-alice",
      ["MCP-Protocol-Version"] = "2026-07-28",
      ["Mcp-Method"] = method,
   }
   if name then
      h["Mcp-Name"] = name
   end
   return h
end

local LIST_HEADERS = headers("tools/list")
local CALL_HEADERS = headers("tools/call", "notes_delete")

local function title_of(k)
   return string.format("bench-t%d-note %02d", tid, k)
end

local function call_body(k, extra)
   next_id = next_id + 1
   return '{"jsonrpc":"2.0","id":' .. next_id .. ',"method":"tools/call","params":{' .. META
      .. ',"name":"notes_delete","arguments":{"workspaceUri":"file:///work/notes","title":"'
      .. title_of(k) .. '"}' .. (extra or "") .. '}}'
end

function init(args)
   mode = args[1] or "list"
   path = wrk.path
   for k = 0, NOTES_PER_THREAD - 1 do
      table.insert(free, k)
   end
   if mode == "list" then
      wrk.method = "POST"
      -- Into wrk's own table: it holds the Host header wrk.format copies.
      for name, value in pairs(LIST_HEADERS) do
         wrk.headers[name] = value
      end
      wrk.body = '{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{' .. META .. '}}'
      list_request = wrk.format()
   end
end

local function flow_body(extra)
   next_id = next_id + 1
   return '{"jsonrpc":"2.0","id":' .. next_id .. ',"method":"tools/call","params":{' .. META
      .. ',"name":"notes_delete","arguments":{"workspaceUri":"file:///work/notes","title":"tps"}'
      .. (extra or "") .. '}}'
end

local function flow_request()
   local state = table.remove(pending, 1)
   if state then
      local answer = ',"requestState":"' .. state
         .. '","inputResponses":{"delete_choice":{"action":"cancel"}}'
      return wrk.format("POST", path, CALL_HEADERS, flow_body(answer))
   end
   return wrk.format("POST", path, CALL_HEADERS, flow_body())
end

local function flow_response(status, body)
   if status == 200 and string.find(body, '"input_required"', 1, true) then
      local state = string.match(body, '"requestState"%s*:%s*"([^"]+)"')
      if state then
         rounds = rounds + 1
         table.insert(pending, state)
         return
      end
   elseif status == 200 and string.find(body, '"status"%s*:%s*"cancelled"') then
      cancelled = cancelled + 1
      return
   end
   unexpected = unexpected + 1
   io.stderr:write("unexpected answer: " .. status .. " " .. string.sub(body, 1, 300) .. "\n")
end

function request()
   if mode == "list" then
      return list_request
   end
   if mode == "flow" then
      return flow_request()
   end
   local retry = table.remove(pending, 1)
   if retry then
      local answer = ',"requestState":"' .. retry.state .. '","inputResponses":{"delete_choice":'
         .. '{"action":"accept","content":{"note_id":"bench-' .. tid .. '-' .. retry.k
         .. '","confirm":true}}}'
      return wrk.format("POST", path, CALL_HEADERS, call_body(retry.k, answer))
   end
   local k = table.remove(free, 1)
   if not k then
      -- More connections than reserved notes: the runner never configures this.
      error("no free note: use at most " .. NOTES_PER_THREAD .. " connections per thread")
   end
   return wrk.format("POST", path, CALL_HEADERS, call_body(k))
end

function response(status, hdrs, body)
   if mode == "list" then
      if status ~= 200 or not string.find(body, '"notes_delete"', 1, true)
         or not string.find(body, '"ttlMs"', 1, true) then
         unexpected = unexpected + 1
      end
      return
   end
   if mode == "flow" then
      return flow_response(status, body)
   end
   if string.find(body, '"input_required"', 1, true) then
      local state = string.match(body, '"requestState"%s*:%s*"([^"]+)"')
      local k = tonumber(string.match(body, '"const"%s*:%s*"bench%-%d+%-(%d+)"'))
      if state and k then
         rounds = rounds + 1
         table.insert(pending, { state = state, k = k })
         return
      end
   else
      local k = tonumber(string.match(body, '"noteId"%s*:%s*"bench%-%d+%-(%d+)"'))
      if k then
         table.insert(free, k)
         if string.find(body, '"status"%s*:%s*"deleted"') then
            deleted = deleted + 1
            return
         end
      end
   end
   unexpected = unexpected + 1
   io.stderr:write("unexpected answer: " .. status .. " " .. string.sub(body, 1, 300) .. "\n")
end

function done(summary, latency, requests)
   local total_deleted, total_unexpected, total_rounds, total_cancelled = 0, 0, 0, 0
   for _, thread in ipairs(threads) do
      total_cancelled = total_cancelled + thread:get("cancelled")
      total_deleted = total_deleted + thread:get("deleted")
      total_unexpected = total_unexpected + thread:get("unexpected")
      total_rounds = total_rounds + thread:get("rounds")
   end
   io.write(string.format("requests %d\n", summary.requests))
   io.write(string.format("duration_us %d\n", summary.duration))
   io.write(string.format("socket_errors %d\n", summary.errors.connect + summary.errors.read
      + summary.errors.write + summary.errors.timeout))
   io.write(string.format("bad_status %d\n", summary.errors.status))
   io.write(string.format("p50_us %d\n", latency:percentile(50)))
   io.write(string.format("p99_us %d\n", latency:percentile(99)))
   io.write(string.format("deleted %d\n", total_deleted))
   io.write(string.format("first_rounds %d\n", total_rounds))
   io.write(string.format("cancelled %d\n", total_cancelled))
   io.write(string.format("unexpected %d\n", total_unexpected))
end
