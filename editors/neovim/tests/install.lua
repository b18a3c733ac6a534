-- After an init.lua installed the plugin (tests/e2e/test_neovim_install.py writes it, from the
-- guide's own Lua where it tests an install): where require("memory_ls") came from, whether a
-- client attaches to MEMORY.md in the cwd, and what :checkhealth memory_ls says. It loads no
-- plugin itself (harness.lua would put this folder on the runtimepath first).
--
-- $MEMORY_LS_TEST_OUT: the JSON file to write. $MEMORY_LS_TEST_NO_ATTACH=1: run checkhealth
-- without waiting for a client (a set-up whose server cannot start).
local out_path = assert(os.getenv("MEMORY_LS_TEST_OUT"), "MEMORY_LS_TEST_OUT is not set")
local result = { errors = {} }

local function body()
  local mls = require("memory_ls")
  result.source = debug.getinfo(mls.setup, "S").source:gsub("^@", "")
  result.did_setup = mls.did_setup
  vim.cmd("edit MEMORY.md")
  if os.getenv("MEMORY_LS_TEST_NO_ATTACH") ~= "1" then
    local client
    local attached = vim.wait(60000, function()
      client = vim.lsp.get_clients({ name = "memory_ls", bufnr = 0 })[1]
      return client ~= nil and client.initialized
    end, 50)
    result.attached = attached
    if attached then
      result.root = client.config.root_dir
      -- The first sync done, so that checkhealth sees the index as a user does a moment later.
      vim.wait(60000, function()
        local resp = mls._request_sync(client, "memory/status", vim.empty_dict(), 5000)
        local st = resp and resp.result or {}
        local f = type(st.folders) == "table" and st.folders[1] or st
        return type(f.lastSync) == "table"
      end, 200)
    end
  end
  vim.cmd("checkhealth memory_ls")
  result.health = table.concat(vim.api.nvim_buf_get_lines(0, 0, -1, false), "\n")
end

local ok, err = xpcall(body, debug.traceback)
if not ok then
  table.insert(result.errors, err)
end
local f = assert(io.open(out_path, "w"))
f:write(vim.json.encode(result))
f:close()
vim.cmd("qa!")
