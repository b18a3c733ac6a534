-- Headless test of a teammate's file (a team index hit for a file only on another machine)
-- against a real `memory-ls serve` on a real PostgreSQL. The cwd is a workspace holding
-- MEMORY.md only (it cites memory/fresh.md#L3); memory/fresh.md is in the team index alone.
--
--   MEMORY_LS_CMD=/path/to/memory-ls MEMORY_LS_TEST_OUT=/tmp/out.json MEMORY_LS_PG_URL=... \
--     nvim --headless --clean -c "luafile editors/neovim/tests/team.lua"
--
-- Every check is recorded as {name, ok, detail} in the JSON file; tests/e2e/test_neovim.py reads it.
-- Nvim quits at the end whatever happens.
local h = dofile(vim.fn.fnamemodify(debug.getinfo(1, "S").source:sub(2), ":p:h") .. "/harness.lua")
local server, root = h.server, h.root
local record, check, wait, notes = h.record, h.check, h.wait, h.notes
local uri = "memory-ls://" .. root .. "/memory/fresh.md"
local want = { "# Fresh", "", "The quokka migration is scheduled." }

-- What the current window shows: the buffer's name, lines, cursor line and options.
local function shown()
  local buf = vim.api.nvim_get_current_buf()
  return {
    name = vim.api.nvim_buf_get_name(buf),
    lines = vim.api.nvim_buf_get_lines(buf, 0, -1, false),
    line = vim.api.nvim_win_get_cursor(0)[1],
    modifiable = vim.bo[buf].modifiable,
    readonly = vim.bo[buf].readonly,
    buftype = vim.bo[buf].buftype,
    swapfile = vim.bo[buf].swapfile,
    filetype = vim.bo[buf].filetype,
  }
end

-- Unload the buffer, so that the next open reads it again through the BufReadCmd (quickfix
-- entries into it stay valid).
local function forget(name)
  local buf = vim.fn.bufnr(name)
  if buf ~= -1 then
    vim.api.nvim_buf_delete(buf, { force = true, unload = true })
  end
end

-- The items a search hands its picker (the plugin's own search, with a picker that keeps them).
local function search_items(query)
  local found
  require("memory_ls").search(query, { picker = function(items)
    found = items
  end })
  wait(15000, function()
    return found ~= nil
  end, "the search")
  return found
end

h.run(function()
  local mls = require("memory_ls")
  mls.setup({ cmd = { server, "serve" }, settings = { provider = "none" }, picker = "select" })

  local client = h.attach()
  if not client then
    return
  end

  check(":edit of a teammate's file", function()
    vim.cmd("edit " .. vim.fn.fnameescape(uri))
    local s = shown()
    record(":edit of a teammate's file", s.name == uri and vim.deep_equal(s.lines, want) and not s.modifiable
      and s.readonly and s.buftype == "nofile" and not s.swapfile and s.filetype == "markdown", vim.inspect(s))
    forget(uri)
  end)

  check("search opens a teammate's file at the hit's line", function()
    vim.cmd("edit " .. root .. "/MEMORY.md")
    vim.cmd("MemorySearch quokka migration")
    wait(15000, function()
      return #vim.fn.getqflist() > 0
    end, "quickfix items")
    local first = vim.fn.getqflist()[1]
    local hit = first.user_data.memory_ls
    local qf_ok = vim.api.nvim_buf_get_name(first.bufnr) == uri and first.lnum == 3 and hit.remote == true
      and first.text:find("(team)", 1, true) ~= nil
    -- vim.ui.select (stubbed: the first item) opened it.
    wait(10000, function()
      return vim.api.nvim_buf_get_name(0) == uri
    end, "the picker to open the hit")
    local s = shown()
    record("search opens a teammate's file at the hit's line", qf_ok and s.line == 3 and vim.deep_equal(s.lines, want)
      and not s.modifiable, vim.inspect({ qf = first.text, lnum = first.lnum, shown = s }))
  end)

  check("picker previews of a teammate's file", function()
    -- A search's hit that only the team index has, a local file and a teammate's file the index
    -- lacks, in each picker's stand-in: the team text at the hit's line, the disk as before, and
    -- one line saying why; no message pops up meanwhile.
    local fake = dofile(h.dir .. "/fake_pickers.lua")
    vim.cmd("edit " .. root .. "/MEMORY.md")
    local found = search_items("quokka migration")
    local file = root .. "/MEMORY.md"
    local items = {
      found[1],
      { filename = file, lnum = 3, text = "0.50 local", user_data = { memory_ls = { path = "MEMORY.md" } } },
      { filename = "memory-ls://" .. root .. "/memory/nothing-here.md", lnum = 1, text = "0.40 (team) gone",
        user_data = { memory_ls = { path = "memory/nothing-here.md", remote = true } } },
    }
    local before = #notes
    local bad = {}
    for _, kind in ipairs(fake.KINDS) do
      local s = fake.run(kind, items).shown
      if not (s[1] and vim.deep_equal(s[1].lines, want) and s[1].line == 3) then
        table.insert(bad, kind .. " showed for the team hit: " .. vim.inspect(s[1]))
      end
      if not (s[2] and vim.deep_equal(s[2].lines, vim.fn.readfile(file)) and s[2].line == 3) then
        table.insert(bad, kind .. " showed for the local file: " .. vim.inspect(s[2]))
      end
      local why = "memory-ls: cannot read memory/nothing-here.md from the team index: "
      if not (s[3] and #s[3].lines == 1 and vim.startswith(s[3].lines[1], why)) then
        table.insert(bad, kind .. " showed for the missing file: " .. vim.inspect(s[3]))
      end
    end
    record("picker previews of a teammate's file", found[1].filename == uri and #bad == 0 and #notes == before,
      table.concat(bad, "; ") .. " notes: " .. table.concat(vim.list_slice(notes, before + 1), " | "))
  end)

  check("quickfix opens a teammate's file at the hit's line", function()
    forget(uri)
    vim.cmd("cfirst")
    local s = shown()
    record("quickfix opens a teammate's file at the hit's line", s.name == uri and s.line == 3
      and vim.deep_equal(s.lines, want) and not s.modifiable, vim.inspect(s))
  end)

  check("gd on a citation of a teammate's file", function()
    forget(uri)
    vim.cmd("edit " .. root .. "/MEMORY.md") -- read again: attached again a moment later
    wait(10000, function()
      return #vim.lsp.get_clients({ name = "memory_ls", bufnr = 0 }) > 0
    end, "attach to MEMORY.md")
    local lnum = vim.fn.search("memory/fresh.md#L3", "w")
    assert(lnum > 0, "MEMORY.md has no citation of memory/fresh.md")
    local col = vim.api.nvim_get_current_line():find("memory/fresh", 1, true)
    vim.api.nvim_win_set_cursor(0, { lnum, col + 3 })
    vim.cmd("normal gd")
    wait(10000, function()
      return vim.api.nvim_buf_get_name(0) == uri
    end, "gd to open the teammate's file")
    local s = shown()
    record("gd on a citation of a teammate's file", s.line == 3 and vim.deep_equal(s.lines, want), vim.inspect(s))
  end)

  check("workspace symbol of a teammate's file", function()
    forget(uri)
    vim.cmd("cclose")
    vim.fn.setqflist({}, "r")
    vim.lsp.buf.workspace_symbol("quokka migration")
    wait(10000, function()
      return #vim.fn.getqflist() > 0
    end, "workspace symbols")
    local first = vim.fn.getqflist()[1] -- the chunk "# Fresh", from its first line
    vim.cmd("cclose | cfirst")
    local s = shown()
    record("workspace symbol of a teammate's file", vim.api.nvim_buf_get_name(first.bufnr) == uri
      and first.text:find("Fresh", 1, true) ~= nil and s.name == uri and s.line == 1 and vim.deep_equal(s.lines, want),
      vim.inspect({ first.text, s }))
  end)

  check("a file the team index lacks says so", function()
    local missing = "memory-ls://" .. root .. "/memory/nothing-here.md"
    local before = #notes
    pcall(vim.cmd, "edit " .. vim.fn.fnameescape(missing))
    local said = table.concat(vim.list_slice(notes, before + 1), "\n")
    record("a file the team index lacks says so",
      said:find("memory-ls: cannot read " .. missing .. " from the team index", 1, true) ~= nil, said)
  end)

  check("checkhealth names the team index", function()
    vim.cmd("checkhealth memory_ls")
    local text = table.concat(vim.api.nvim_buf_get_lines(0, 0, -1, false), "\n")
    vim.cmd("bwipeout")
    local url = assert(os.getenv("MEMORY_LS_PG_URL"), "MEMORY_LS_PG_URL is not set")
    local password = assert(url:match("^postgres[%a]*://[^:/@]*:([^@]+)@"), "no password in the test URL")
    record("checkhealth names the team index", text:find("team index postgresql://", 1, true) ~= nil
      and text:find("answering postgres", 1, true) ~= nil and text:find(password, 1, true) == nil, text)
  end)

  check("a teammate's transcript with two servers running", function()
    -- A transcript of a teammate's agent is under a sessions root, outside every workspace: with
    -- a second server running (for another workspace), neither root holds it, and the server
    -- that has it in its team index must still be found.
    local other = assert(os.getenv("MEMORY_LS_TEST_OTHER_WS"), "MEMORY_LS_TEST_OTHER_WS is not set")
    local function server_for(folder)
      vim.cmd("edit " .. vim.fn.fnameescape(folder .. "/MEMORY.md"))
      vim.cmd("edit") -- read again: a buffer still loaded from before attaches only when read
      local c
      wait(30000, function()
        c = vim.lsp.get_clients({ name = "memory_ls", bufnr = 0 })[1]
        return c ~= nil and c.initialized and c.config.root_dir == vim.fs.normalize(folder)
      end, "a server for " .. folder)
      return c
    end
    -- The other workspace's server is asked first (it has no such file), so this one is
    -- restarted after it.
    local theirs = server_for(other)
    for _, c in ipairs(vim.lsp.get_clients({ name = "memory_ls" })) do
      if c.config.root_dir == root then
        vim.lsp.stop_client(c.id)
      end
    end
    wait(10000, function()
      return #vim.lsp.get_clients({ name = "memory_ls" }) == 1
    end, "this workspace's server to stop")
    local ours = server_for(root)
    local order = vim.tbl_map(function(c)
      return c.id
    end, vim.lsp.get_clients({ name = "memory_ls" }))
    assert(vim.deep_equal(order, { theirs.id, ours.id }), "the other server is not asked first: " .. vim.inspect(order))
    local found = search_items("where do the gannets nest")
    local hit
    for _, item in ipairs(found) do
      if item.user_data.memory_ls.path == "sessions:agent/run-7.jsonl" then
        hit = item
      end
    end
    assert(hit, "no hit of the transcript: " .. vim.inspect(found))
    local before = #notes
    vim.cmd("edit " .. vim.fn.fnameescape(hit.filename))
    local s = shown()
    local text = table.concat(s.lines, "\n")
    record("a teammate's transcript with two servers running", #vim.lsp.get_clients({ name = "memory_ls" }) == 2
      and vim.startswith(hit.filename, "memory-ls://") and s.name == hit.filename
      and text:find("The gannets nest on the north cliffs.", 1, true) ~= nil and not s.modifiable
      and #notes == before, vim.inspect({ hit = hit.filename, shown = s, notes = vim.list_slice(notes, before + 1) }))
  end)
end)
