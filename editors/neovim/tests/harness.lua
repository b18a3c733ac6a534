-- What the headless test scripts (headless.lua, team.lua) share: the plugin on the runtimepath,
-- the environment they read, the checks they record and the JSON file they write. Load it with
--
--   local h = dofile(vim.fn.fnamemodify(debug.getinfo(1, "S").source:sub(2), ":p:h") .. "/harness.lua")
--
-- Every check is recorded as {name, ok, detail} in h.results.checks; h.run writes them to
-- $MEMORY_LS_TEST_OUT (tests/e2e/test_neovim.py reads it) and quits Nvim whatever happens.
local plugin_dir = vim.fn.fnamemodify(debug.getinfo(1, "S").source:sub(2), ":p:h:h")
vim.opt.rtp:prepend(plugin_dir)

local h = {}

-- This folder: the stand-ins of the pickers are fake_pickers.lua here.
h.dir = vim.fn.fnamemodify(debug.getinfo(1, "S").source:sub(2), ":p:h")

h.out_path = assert(os.getenv("MEMORY_LS_TEST_OUT"), "MEMORY_LS_TEST_OUT is not set")
h.server = os.getenv("MEMORY_LS_CMD") or "memory-ls"
h.root = vim.fs.normalize(vim.fn.getcwd())
h.results = { root = h.root, checks = {} }

function h.record(name, ok, detail)
  table.insert(h.results.checks, { name = name, ok = ok and true or false, detail = detail and tostring(detail) or "" })
end

-- Run fn; an error in it is recorded as a failed check called name.
function h.check(name, fn)
  local ok, err = xpcall(fn, debug.traceback)
  if not ok then
    h.record(name, false, err)
  end
end

-- Wait up to ms for cond; an error (blamed on the caller) when it never holds.
function h.wait(ms, cond, what)
  if not vim.wait(ms, cond, 20) then
    error("timed out after " .. ms .. " ms waiting for " .. what, 2)
  end
end

-- The check "attach": edit MEMORY.md and wait for the memory_ls client to attach (its root_dir the
-- cwd); more(client), if given, records further checks there. The client, or nil when it did not attach.
function h.attach(more)
  local client
  h.check("attach", function()
    vim.cmd("edit MEMORY.md")
    h.wait(30000, function()
      client = vim.lsp.get_clients({ name = "memory_ls", bufnr = 0 })[1]
      return client ~= nil and client.initialized
    end, "the client to attach")
    h.record("attach", client.config.root_dir == h.root, "root_dir " .. tostring(client.config.root_dir))
    if more then
      more(client)
    end
  end)
  return client
end

-- Messages and pickers: record instead of showing (vim.ui.select takes the first item).
h.notes = {}
local orig_notify = vim.notify
vim.notify = function(msg, level, o)
  table.insert(h.notes, msg)
  return orig_notify(msg, level, o)
end
vim.ui.select = function(items, _, on_choice)
  on_choice(items[1], 1)
end

-- Write the results (with the notes) to the JSON file and quit.
function h.finish()
  h.results.notes = h.notes
  local f = assert(io.open(h.out_path, "w"))
  f:write(vim.json.encode(h.results))
  f:close()
  vim.cmd("qa!")
end

-- Run the script's body, record an unexpected error in it as the check "script", then finish.
function h.run(body)
  if not xpcall(body, debug.traceback) then
    h.record("script", false, "unexpected error")
  end
  h.finish()
end

return h
