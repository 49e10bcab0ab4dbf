// kiln device prelude (placeholder until the tile library lands).
namespace kiln {}
