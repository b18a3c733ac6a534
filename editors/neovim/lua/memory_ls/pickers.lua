-- Pickers for search results (quickfix items with user_data.memory_ls = the hit):
-- Telescope, fzf-lua, snacks.nvim when installed, else vim.ui.select; or the quickfix window.
local M = {}

local function has(mod)
  local ok = pcall(require, mod)
  return ok
end

local function relpath(item)
  local hit = item.user_data and item.user_data.memory_ls
  return hit and hit.path or vim.fn.fnamemodify(item.filename, ":~:.")
end

local function label(item)
  local hit = item.user_data and item.user_data.memory_ls or {}
  return string.format("%s:%d  %s", relpath(item), item.lnum, item.text)
    .. (hit.citation and ("  [" .. hit.citation .. "]") or "")
end
M.label = label

function M.select(items, opts)
  vim.ui.select(items, {
    prompt = opts.title,
    kind = "memory_ls",
    format_item = label,
  }, function(choice)
    if choice then
      opts.on_choice(choice)
    end
  end)
end

function M.quickfix()
  -- The list's title (query, result count, mode) shows in the quickfix window's status line.
  vim.cmd("botright copen")
end

function M.telescope(items, opts)
  local pickers = require("telescope.pickers")
  local finders = require("telescope.finders")
  local conf = require("telescope.config").values
  local actions = require("telescope.actions")
  local action_state = require("telescope.actions.state")
  pickers
    .new({}, {
      prompt_title = opts.title,
      finder = finders.new_table({
        results = items,
        entry_maker = function(item)
          return {
            value = item,
            display = label(item),
            ordinal = label(item),
            filename = item.filename,
            lnum = item.lnum,
            col = 1,
          }
        end,
      }),
      sorter = conf.generic_sorter({}),
      previewer = conf.qflist_previewer({}),
      attach_mappings = function(prompt_bufnr)
        actions.select_default:replace(function()
          local entry = action_state.get_selected_entry()
          actions.close(prompt_bufnr)
          if entry then
            opts.on_choice(entry.value)
          end
        end)
        return true
      end,
    })
    :find()
end

function M.fzf_lua(items, opts)
  local fzf = require("fzf-lua")
  local lookup, entries = {}, {}
  for i, item in ipairs(items) do
    -- "path:line:col: text" lets fzf-lua's builtin previewer show the file at the line.
    local entry = string.format("%s:%d:1: %s", item.filename, item.lnum, item.text)
    if lookup[entry] then
      entry = entry .. string.rep(" ", i)
    end
    lookup[entry] = item
    table.insert(entries, entry)
  end
  fzf.fzf_exec(entries, {
    prompt = "Memory> ",
    winopts = { title = " " .. opts.title .. " " },
    previewer = "builtin",
    actions = {
      ["default"] = function(selected)
        local item = selected and lookup[selected[1]]
        if item then
          opts.on_choice(item)
        end
      end,
    },
  })
end

function M.snacks(items, opts)
  local picker_items = {}
  for i, item in ipairs(items) do
    table.insert(picker_items, {
      idx = i,
      score = #items - i,
      text = label(item),
      file = item.filename,
      pos = { item.lnum, 0 },
      end_pos = item.end_lnum and { item.end_lnum, 0 } or nil,
      qf = item,
    })
  end
  Snacks.picker.pick({
    source = "memory_ls",
    title = opts.title,
    items = picker_items,
    format = "file",
    preview = "file",
    confirm = function(picker, it)
      picker:close()
      if it then
        opts.on_choice(it.qf)
      end
    end,
  })
end

--- Which picker "auto" means here.
function M.detect()
  if has("telescope") then
    return "telescope"
  end
  if has("fzf-lua") then
    return "fzf-lua"
  end
  if type(_G.Snacks) == "table" and Snacks.picker then
    return "snacks"
  end
  return "select"
end

function M.pick(kind, items, opts)
  if kind == "auto" or kind == nil then
    kind = M.detect()
  end
  if kind == "none" or kind == false then
    return
  elseif kind == "quickfix" then
    return M.quickfix(items, opts)
  elseif kind == "telescope" then
    return M.telescope(items, opts)
  elseif kind == "fzf-lua" then
    return M.fzf_lua(items, opts)
  elseif kind == "snacks" then
    return M.snacks(items, opts)
  end
  return M.select(items, opts)
end

return M
