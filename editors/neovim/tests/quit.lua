-- Nvim quits (`qa!`) while many :MemorySearch requests are in flight (issue 38, part 1): the
-- server it started must not outlive it. tests/e2e/test_neovim_quit.py runs it and then looks
-- for the server's process.
--
--   MEMORY_LS_CMD=/path/to/memory-ls MEMORY_LS_TEST_OUT=/tmp/out.json MEMORY_LS_TEST_SEARCHES=10000 \
--     nvim --headless --clean -c "luafile editors/neovim/tests/quit.lua"   (cwd: a memory workspace)
--
-- Recorded in the JSON file before quitting: the checks, the PIDs (and names) of the
-- processes Nvim started (the server), how many searches were sent and how many were still
-- unanswered at the `qa!`.
local h = dofile(vim.fn.fnamemodify(debug.getinfo(1, "S").source:sub(2), ":p:h") .. "/harness.lua")
local results, record, check = h.results, h.record, h.check
results.nvim = tostring(vim.version())
results.nvim_pid = vim.fn.getpid()

local searches = tonumber(os.getenv("MEMORY_LS_TEST_SEARCHES") or "10000")

h.run(function()
  local mls = require("memory_ls")
  mls.setup({
    cmd = { h.server, "serve" },
    settings = { provider = "none" },
    picker = "none", -- each answer only fills the quickfix list
  })
  local client = h.attach()
  if not client then
    return
  end

  check("server answers", function()
    -- The index is built and a search answered: the server is up before the burst.
    local res, err = client:request_sync("memory/search", { query = "token bucket" }, 20000, 0)
    record("server answers", res ~= nil and res.err == nil and res.result ~= nil, vim.inspect(err or (res and res.err)))
  end)

  check("server pid", function()
    -- The children of this Nvim: the server (the memory-ls console script runs Python itself).
    results.server = {}
    for _, pid in ipairs(vim.api.nvim_get_proc_children(vim.fn.getpid())) do
      local p = vim.api.nvim_get_proc(pid)
      table.insert(results.server, { pid = pid, name = p and p.name or "" })
    end
    record("server pid", #results.server > 0, vim.inspect(results.server))
  end)

  check("searches in flight at quit", function()
    -- Fired without waiting for any answer.
    local queries = { "token bucket", "rate limit", "api design", "people", "decision" }
    for i = 1, searches do
      vim.cmd("MemorySearch " .. queries[i % #queries + 1] .. " " .. i)
    end
    -- Then only until every request is written into the server's pipe: libuv queues what the
    -- pipe cannot take yet, and what is still queued at the exit never reaches the server. The
    -- answers read meanwhile are few; the rest are in flight at the `qa!` of h.finish.
    local function queued_bytes()
      local n = 0
      vim.uv.walk(function(handle)
        if handle:get_type() == "pipe" and not handle:is_closing() then
          n = n + handle:get_write_queue_size()
        end
      end)
      return n
    end
    local t0 = vim.uv.hrtime()
    h.wait(20000, function()
      return queued_bytes() == 0
    end, "the requests to be written")
    results.drain_ms = (vim.uv.hrtime() - t0) / 1e6
    local pending = 0
    for _, r in pairs(client.requests) do
      if r.type == "pending" and r.method == "memory/search" then
        pending = pending + 1
      end
    end
    results.searches = searches
    results.pending = pending
    record("searches in flight at quit", pending > 0, pending .. " of " .. searches .. " pending")
  end)
end)
