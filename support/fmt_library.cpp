// fmt's compiled part, built once here for every kiln library and tool.
//
// kiln uses fmt (Debian's libfmt-dev) without its shared library: kiln's binaries must run on machines that
// have none (the GPU machines), and Debian ships no static libfmt.a. Defining FMT_HEADER_ONLY would do that,
// but it makes every translation unit compile fmt's formatting engine (format-inl.h) again: kiln's libraries
// took 389 s to build that way and take 268 s this way (GCC 12, Release, 2 cores; worklog §69). So fmt is used as a
// compiled library and this file is that library: format-inl.h's definitions, plus the explicit
// instantiations the headers declare `extern` and leave to the library.
#include <fmt/format-inl.h>

FMT_BEGIN_NAMESPACE
namespace detail {

template FMT_API auto dragonbox::to_decimal(float x) noexcept -> dragonbox::decimal_fp<float>;
template FMT_API auto dragonbox::to_decimal(double x) noexcept -> dragonbox::decimal_fp<double>;

template FMT_API locale_ref::locale_ref(const std::locale& loc);
template FMT_API auto locale_ref::get<std::locale>() const -> std::locale;

template FMT_API auto thousands_sep_impl(locale_ref) -> thousands_sep_result<char>;
template FMT_API auto decimal_point_impl(locale_ref) -> char;
template FMT_API void buffer<char>::append(const char*, const char*);
template FMT_API void vformat_to(buffer<char>&, string_view, basic_format_args<FMT_BUFFER_CONTEXT(char)>,
                                 locale_ref);

template FMT_API auto thousands_sep_impl(locale_ref) -> thousands_sep_result<wchar_t>;
template FMT_API auto decimal_point_impl(locale_ref) -> wchar_t;
template FMT_API void buffer<wchar_t>::append(const wchar_t*, const wchar_t*);

} // namespace detail
FMT_END_NAMESPACE
