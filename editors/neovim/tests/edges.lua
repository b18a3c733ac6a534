-- Headless test of what a user meets beyond the tour of headless.lua, against a real
-- `memory-ls serve`: the plugin options whose default is nil, :MemoryGet on the citation under
-- the cursor, gd on a citation past the end of its file, a file of a second workspace, a server
-- that exits. The cwd is a copy of examples/demo with
-- memory/café.md; the transcripts of $MEMORY_LS_TEST_SESSIONS are the sessions root "agent";
-- $MEMORY_LS_TEST_OTHER_WS is another workspace (MEMORY.md and notes.txt).
--
--   MEMORY_LS_CMD=/path/to/memory-ls MEMORY_LS_TEST_OUT=/tmp/out.json \
--     nvim --headless --clean -c "luafile editors/neovim/tests/edges.lua"
--
-- Every check is recorded as {name, ok, detail} in the JSON file; tests/e2e/test_neovim.py reads it.
-- Nvim quits at the end whatever happens.
local h = dofile(vim.fn.fnamemodify(debug.getinfo(1, "S").source:sub(2), ":p:h") .. "/harness.lua")
local server, results = h.server, h.results
local record, check, wait = h.record, h.check, h.wait

if os.getenv("MEMORY_LS_TEST_LEGACY") == "1" then
  vim.g.memory_ls_no_lsp_config = true -- the Neovim 0.10 way: FileType + vim.lsp.start
end

-- The plugin's own search; its result once the server answered.
local function search(query)
  local got
  require("memory_ls").search(query, { picker = "none", on_results = function(result)
    got = result
  end })
  wait(15000, function()
    return got ~= nil
  end, "an answer to " .. query)
  return got
end

h.run(function()
  local mls = require("memory_ls")
  local attached_to = {}
  mls.setup({
    cmd = { server, "serve" },
    settings = {
      provider = "none",
      sources = { "memory", "sessions" },
      sessions = { roots = { { path = assert(os.getenv("MEMORY_LS_TEST_SESSIONS")), name = "agent" } } },
    },
    picker = "none",
    -- Options whose default is nil: plugin options, not server settings.
    max_results = 1,
    cmd_env = { MEMORY_LS_TEST_MARK = "1" },
    on_attach = function(_, bufnr)
      table.insert(attached_to, bufnr)
    end,
  })
  results.registration = mls.registration

  local client = h.attach()
  if not client then
    return
  end

  check("options with a nil default", function()
    local result = search("rate limiting token bucket deploys incident")
    record("options with a nil default", #result.results == 1 and attached_to[1] == vim.api.nvim_get_current_buf()
      and vim.deep_equal(client.config.cmd_env, { MEMORY_LS_TEST_MARK = "1" }) and mls.config.settings.max_results == nil,
      vim.inspect({ results = #result.results, attached_to = attached_to, cmd_env = client.config.cmd_env,
        settings = mls.config.settings }))
  end)

  check("open buffers get the next server", function()
    -- The server dies (killed, as by a crash); the next command starts another one, which must
    -- serve the buffers the dead one served (gd, K, unsaved edits), not only the command.
    local buf = vim.api.nvim_get_current_buf()
    local attaches = #attached_to
    client.rpc.terminate()
    wait(10000, function()
      return vim.lsp.get_client_by_id(client.id) == nil
    end, "the server to exit")
    local status
    mls.status({ quiet = true, on_result = function(r)
      status = r
    end })
    wait(30000, function()
      return status ~= nil
    end, "memory/status from a new server")
    local now = vim.lsp.get_clients({ name = "memory_ls", bufnr = buf })[1]
    record("open buffers get the next server", now ~= nil and now.id ~= client.id and #attached_to == attaches + 1,
      vim.inspect({ attached = now and now.id, on_attach_calls = #attached_to - attaches }))
    client = now or client
  end)

  check("MemoryGet on the citation under the cursor", function()
    -- A transcript's citation (as :MemoryInsertCitation inserts it) and a note of a non-ASCII
    -- name, in quotes: what the server takes for citations.
    local line = "From sessions:agent/run-7.jsonl#L2 and “memory/café.md#L3”."
    local bad = {}
    for _, case in ipairs({ { "agent/run", "north cliffs" }, { "sessions:", "north cliffs" }, { "café", "zebra crossing" } }) do
      vim.cmd("enew!")
      vim.api.nvim_buf_set_lines(0, 0, -1, false, { line })
      vim.api.nvim_win_set_cursor(0, { 1, (line:find(case[1], 1, true)) })
      vim.cmd("MemoryGet")
      local text
      vim.wait(10000, function()
        if vim.api.nvim_buf_get_name(0):match("^memory://") then
          text = table.concat(vim.api.nvim_buf_get_lines(0, 0, -1, false), "\n")
        end
        return text ~= nil
      end, 20)
      if not (text and text:find(case[2], 1, true)) then
        table.insert(bad, case[1] .. ": " .. vim.inspect(text) .. " " .. vim.inspect(h.notes[#h.notes]))
      end
      if text then
        vim.cmd("close")
      end
    end
    record("MemoryGet on the citation under the cursor", #bad == 0, table.concat(bad, "; "))
    vim.bo.modified = false
  end)

  check("citations under memory.roots and sessions.roots keep their prefix", function()
    local util = require("memory_ls.util")
    local got = util.find_citations("See memory:openclaw/memory/2026-01-10.md#L2-L4 and sessions:agent/run-7.jsonl#L2.")
    local paths = vim.tbl_map(function(c)
      return c.path .. ":" .. c.start .. "-" .. c["end"]
    end, got)
    local want = { "memory:openclaw/memory/2026-01-10.md:2-4", "sessions:agent/run-7.jsonl:2-2" }
    record("citations under memory.roots and sessions.roots keep their prefix", vim.deep_equal(paths, want),
      vim.inspect(got))
  end)

  check("gd on a citation past the end of its file", function()
    -- memory/people.md has 5 lines: gd opens it at its last line (the server flags the citation).
    local file = h.root .. "/MEMORY.md"
    vim.cmd("edit " .. vim.fn.fnameescape(file))
    wait(10000, function()
      return #vim.lsp.get_clients({ name = "memory_ls", bufnr = 0 }) > 0
    end, "attach to MEMORY.md")
    vim.api.nvim_buf_set_lines(0, -1, -1, false, { "See memory/people.md#L99-L120." })
    local last = vim.api.nvim_buf_line_count(0)
    vim.api.nvim_win_set_cursor(0, { last, 8 })
    local errors = {}
    local schedule = vim.schedule -- the definition handler runs scheduled: its error is caught
    vim.schedule = function(fn)
      schedule(function()
        local ok, e = pcall(fn)
        if not ok then
          table.insert(errors, tostring(e))
        end
      end)
    end
    vim.cmd("normal gd")
    vim.wait(5000, function()
      return #errors > 0 or vim.api.nvim_buf_get_name(0):match("people%.md$") ~= nil
    end, 20)
    vim.wait(300)
    vim.schedule = schedule
    local want = #vim.fn.readfile(h.root .. "/memory/people.md")
    record("gd on a citation past the end of its file", #errors == 0
      and vim.api.nvim_buf_get_name(0) == h.root .. "/memory/people.md" and vim.api.nvim_win_get_cursor(0)[1] == want,
      vim.inspect({ name = vim.api.nvim_buf_get_name(0), cursor = vim.api.nvim_win_get_cursor(0), errors = errors }))
    vim.cmd("edit " .. vim.fn.fnameescape(file))
    vim.cmd("edit!")
  end)

  check("a file of another workspace is searched there", function()
    -- Only this workspace's server runs; a text file of the other one (no server attaches to
    -- it) searches the other one's memory, through a server started for it.
    local other = vim.fs.normalize(assert(os.getenv("MEMORY_LS_TEST_OTHER_WS")))
    vim.cmd("edit " .. vim.fn.fnameescape(other .. "/notes.txt"))
    -- (Asked again until the new server's first sync has indexed the file.)
    local hit = {}
    local deadline = vim.uv.now() + 20000
    while not hit.uri and vim.uv.now() < deadline do
      hit = search("ocelot plan").results[1] or {}
      if not hit.uri then
        vim.wait(300)
      end
    end
    local roots = vim.tbl_map(function(c)
      return c.config.root_dir
    end, vim.lsp.get_clients({ name = "memory_ls" }))
    record("a file of another workspace is searched there", hit.uri == vim.uri_from_fname(other .. "/MEMORY.md"),
      vim.inspect({ hit = hit.uri, roots = roots }))
    vim.cmd("edit " .. vim.fn.fnameescape(h.root .. "/MEMORY.md"))
  end)
end)
