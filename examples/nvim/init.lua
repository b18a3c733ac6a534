-- Try the Neovim plugin on the demo workspace without touching your own config:
--
--   nvim -u examples/nvim/init.lua examples/demo/MEMORY.md
--
-- Uses the repository's .venv/bin/memory-ls when there is one, else `memory-ls` on PATH.
local repo = vim.fn.fnamemodify(debug.getinfo(1, "S").source:sub(2), ":p:h:h:h")
vim.opt.rtp:prepend(repo .. "/editors/neovim")

local venv = repo .. "/.venv/bin/memory-ls"
require("memory_ls").setup({
  cmd = { vim.fn.executable(venv) == 1 and venv or "memory-ls", "serve" },
  settings = {
    -- provider = "none",          -- keyword-only
    query = { maxResults = 8 },
  },
})

vim.g.mapleader = " "
vim.keymap.set("n", "<leader>ms", "<cmd>MemorySearch<cr>", { desc = "Memory: search" })
vim.keymap.set("n", "<leader>mc", "<cmd>MemoryInsertCitation<cr>", { desc = "Memory: insert citation" })
vim.keymap.set("n", "<leader>mi", "<cmd>MemoryStatus<cr>", { desc = "Memory: status" })
vim.o.statusline = " %f %m%=%{v:lua.require'memory_ls'.statusline()}  %l:%c "
vim.o.laststatus = 2
