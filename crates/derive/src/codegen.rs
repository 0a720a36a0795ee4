//! Code generation for `#[derive(CustomResource)]`.

use crate::attrs::{self, Attrs};
use crate::names;
use proc_macro2::{Span, TokenStream};
use quote::{ToTokens, quote, quote_spanned};
use syn::spanned::Spanned;

/// Resolved paths of the crates the generated code uses.
struct Paths {
    kubewright: TokenStream,
    core: TokenStream,
    k8s: TokenStream,
    schemars: TokenStream,
    serde: TokenStream,
    serde_json: TokenStream,
}

impl Paths {
    fn new(c: &attrs::Crates) -> Self {
        let kubewright = c
            .kubewright
            .as_ref()
            .map(ToTokens::to_token_stream)
            .unwrap_or_else(|| quote!(::kubewright));
        let or = |p: &Option<syn::Path>, default: TokenStream| {
            p.as_ref().map(ToTokens::to_token_stream).unwrap_or(default)
        };
        Self {
            core: or(&c.kubewright_core, quote!(#kubewright::core)),
            k8s: or(&c.k8s_openapi, quote!(#kubewright::k8s_openapi)),
            schemars: or(&c.schemars, quote!(#kubewright::schemars)),
            serde: or(&c.serde, quote!(#kubewright::serde)),
            serde_json: or(&c.serde_json, quote!(#kubewright::serde_json)),
            kubewright,
        }
    }
}

fn opt_str(v: &Option<String>) -> TokenStream {
    match v {
        Some(s) => quote!(::core::option::Option::Some(#s)),
        None => quote!(::core::option::Option::None),
    }
}

pub(crate) fn expand(input: syn::DeriveInput) -> syn::Result<TokenStream> {
    match &input.data {
        syn::Data::Struct(_) => {}
        syn::Data::Enum(e) => {
            return Err(syn::Error::new(
                e.enum_token.span,
                "#[derive(CustomResource)] goes on the spec struct of a custom resource, not on an enum",
            ));
        }
        syn::Data::Union(u) => {
            return Err(syn::Error::new(
                u.union_token.span,
                "#[derive(CustomResource)] goes on the spec struct of a custom resource, not on a union",
            ));
        }
    }
    let attrs = attrs::parse(&input.attrs, input.ident.span())?;
    if !input.generics.params.is_empty() {
        return Err(syn::Error::new(
            input.generics.span(),
            "#[derive(CustomResource)] does not support generic spec structs: the CRD needs one concrete schema",
        ));
    }
    let (Some(group), Some(version), Some(kind)) = (&attrs.group, &attrs.version, &attrs.kind)
    else {
        // attrs::parse reports missing keys; this is unreachable in practice.
        return Err(syn::Error::new(
            Span::call_site(),
            "group, version and kind are required",
        ));
    };
    if input.ident == kind.value {
        let spec = input.ident.to_string();
        let hint = match spec.strip_suffix("Spec").filter(|k| !k.is_empty()) {
            Some(k) => format!("use kind = \"{k}\""),
            None => format!("rename the spec struct to `{spec}Spec`"),
        };
        return Err(syn::Error::new(
            kind.span,
            format!(
                "kind `{}` also names the generated struct, which would clash with the spec struct; \
                 by convention the spec struct is `<Kind>Spec`: {hint}",
                kind.value
            ),
        ));
    }
    let paths = Paths::new(&attrs.crates);
    Ok(generate(
        &input,
        &attrs,
        &group.value,
        &version.value,
        kind,
        &paths,
    ))
}

fn generate(
    input: &syn::DeriveInput,
    attrs: &Attrs,
    group: &str,
    version: &str,
    kind_lit: &attrs::At<String>,
    paths: &Paths,
) -> TokenStream {
    let Paths {
        kubewright: kw,
        core,
        k8s,
        schemars,
        serde,
        serde_json,
    } = paths;
    let vis = &input.vis;
    let spec_ident = &input.ident;
    let kind_str = &kind_lit.value;
    let kind = syn::Ident::new(kind_str, kind_lit.span);
    let list_kind = format!("{kind_str}List");
    let api_version = format!("{group}/{version}");
    let plural = attrs
        .plural
        .as_ref()
        .map(|p| p.value.clone())
        .unwrap_or_else(|| names::plural_of(kind_str));
    let singular = attrs
        .singular
        .as_ref()
        .map(|p| p.value.clone())
        .unwrap_or_else(|| kind_str.to_ascii_lowercase());
    let crd_name = format!("{plural}.{group}");
    let namespaced = attrs.namespaced;
    let scope = if namespaced {
        quote!(#k8s::NamespaceResourceScope)
    } else {
        quote!(#k8s::ClusterResourceScope)
    };
    let serde_crate = serde.to_string().replace(' ', "");
    let object_meta = quote!(#k8s::apimachinery::pkg::apis::meta::v1::ObjectMeta);
    let crd_ty = quote!(
        #k8s::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition
    );
    let derives = &attrs.derives;
    let short_names = &attrs.short_names;
    let categories = &attrs.categories;
    let selectable = &attrs.selectable_fields;
    let served = attrs.served;
    let storage = attrs.storage;
    let deprecated = attrs.deprecated;
    let deprecation_warning = opt_str(&attrs.deprecation_warning);
    let spec_name = spec_ident.to_string();

    let columns = attrs.printer_columns.iter().map(|c| {
        let name = &c.name;
        let json_path = &c.json_path;
        let ty = &c.type_;
        let priority = match c.priority {
            Some(p) => quote!(::core::option::Option::Some(#p)),
            None => quote!(::core::option::Option::None),
        };
        let description = opt_str(&c.description);
        let format = opt_str(&c.format);
        quote! {
            #kw::crd::__private::PrinterColumn {
                name: #name,
                json_path: #json_path,
                type_: #ty,
                priority: #priority,
                description: #description,
                format: #format,
            }
        }
    });
    let validations = attrs.validations.iter().map(|v| {
        let rule = &v.rule;
        let message = opt_str(&v.message);
        let message_expression = opt_str(&v.message_expression);
        let reason = opt_str(&v.reason);
        let field_path = opt_str(&v.field_path);
        quote! {
            #kw::crd::__private::Validation {
                rule: #rule,
                message: #message,
                message_expression: #message_expression,
                reason: #reason,
                field_path: #field_path,
            }
        }
    });
    let scale = match &attrs.scale {
        Some(s) => {
            let spec = &s.spec_replicas_path;
            let status = &s.status_replicas_path;
            let sel = opt_str(&s.label_selector_path);
            quote! {
                ::core::option::Option::Some(#kw::crd::__private::Scale {
                    spec_replicas_path: #spec,
                    status_replicas_path: #status,
                    label_selector_path: #sel,
                })
            }
        }
        None => quote!(::core::option::Option::None),
    };

    // The status field, its constructor value, serialization and schema.
    let (status_field, status_init, status_ser, status_schema, status_count) = match &attrs.status {
        Some(ty) => {
            let field = quote_spanned! {ty.span()=>
                /// The observed state, written by controllers through the status subresource.
                #[serde(default)]
                pub status: ::core::option::Option<#ty>,
            };
            let ser = quote! {
                match &self.status {
                    ::core::option::Option::Some(status) => {
                        #serde::ser::SerializeStruct::serialize_field(&mut state, "status", status)?;
                    }
                    ::core::option::Option::None => {
                        #serde::ser::SerializeStruct::skip_field(&mut state, "status")?;
                    }
                }
            };
            let schema = quote_spanned! {ty.span()=>
                ::core::option::Option::Some(
                    generator.subschema_for::<::core::option::Option<#ty>>()
                )
            };
            (
                field,
                quote!(status: ::core::option::Option::None,),
                ser,
                schema,
                5usize,
            )
        }
        None => (
            quote!(),
            quote!(),
            quote!(),
            quote!(::core::option::Option::<#schemars::Schema>::None),
            4usize,
        ),
    };

    let kind_doc = format!(
        " The `{kind_str}` custom resource (`{api_version}`), generated by \
         `#[derive(CustomResource)]` on [`{spec_name}`]."
    );
    let new_doc = format!(" Creates a `{kind_str}` named `name` with the given spec.");
    let crd_doc = format!(
        " The `CustomResourceDefinition` of `{kind_str}` (`{crd_name}`), version `{version}`.\n\n \
         # Panics\n\n Panics when the schema of `{spec_name}` cannot be expressed as a \
         structural schema (the message says where and why); [`{kind_str}::try_crd`] returns \
         that error instead."
    );

    quote! {
        #[doc = #kind_doc]
        #[derive(#serde::Deserialize, ::core::clone::Clone, ::core::fmt::Debug #(, #derives)*)]
        #[serde(crate = #serde_crate, rename_all = "camelCase")]
        #vis struct #kind {
            /// Standard object metadata.
            #[serde(default)]
            pub metadata: #object_meta,
            /// The desired state.
            pub spec: #spec_ident,
            #status_field
        }

        impl #kind {
            #[doc = #new_doc]
            pub fn new(name: &str, spec: #spec_ident) -> Self {
                Self {
                    metadata: #object_meta {
                        name: ::core::option::Option::Some(::std::string::ToString::to_string(name)),
                        ..::core::default::Default::default()
                    },
                    spec,
                    #status_init
                }
            }

            #[doc = #crd_doc]
            pub fn crd() -> #crd_ty {
                match Self::try_crd() {
                    ::core::result::Result::Ok(crd) => crd,
                    ::core::result::Result::Err(err) => ::core::panic!("{}", err),
                }
            }

            /// The `CustomResourceDefinition`, or why the schema cannot be made structural.
            pub fn try_crd() -> ::core::result::Result<#crd_ty, #kw::crd::SchemaError> {
                let mut generator = #schemars::generate::SchemaSettings::openapi3()
                    .with(|s| {
                        s.inline_subschemas = true;
                        s.meta_schema = ::core::option::Option::None;
                    })
                    .into_generator();
                let mut spec = generator.subschema_for::<#spec_ident>();
                let mut status: ::core::option::Option<#schemars::Schema> = #status_schema;
                for transform in generator.transforms_mut() {
                    #schemars::transform::Transform::transform(&mut *transform, &mut spec);
                    if let ::core::option::Option::Some(status) = status.as_mut() {
                        #schemars::transform::Transform::transform(&mut *transform, status);
                    }
                }
                let definitions = generator.take_definitions(true);
                let parts = #kw::crd::__private::CrdParts {
                    group: #group,
                    version: #version,
                    kind: #kind_str,
                    plural: #plural,
                    singular: #singular,
                    short_names: &[#(#short_names),*],
                    categories: &[#(#categories),*],
                    namespaced: #namespaced,
                    served: #served,
                    storage: #storage,
                    deprecated: #deprecated,
                    deprecation_warning: #deprecation_warning,
                    printer_columns: &[#(#columns),*],
                    scale: #scale,
                    selectable_fields: &[#(#selectable),*],
                    validations: &[#(#validations),*],
                    spec_type: #spec_name,
                    spec_schema: spec.to_value(),
                    status_schema: status.map(#schemars::Schema::to_value),
                    definitions,
                };
                let value = #kw::crd::__private::build_crd(parts)?;
                #serde_json::from_value(value).map_err(#kw::crd::SchemaError::decode)
            }

            /// `<plural>.<group>`: the name of the CustomResourceDefinition object.
            pub fn crd_name() -> &'static str {
                #crd_name
            }

            /// Type information for dynamic APIs.
            pub fn api_resource() -> #core::ApiResource {
                #core::ApiResource::erase::<Self>(&())
            }

            /// The short names (`kubectl get <short>`).
            pub fn short_names() -> &'static [&'static str] {
                &[#(#short_names),*]
            }
        }

        impl #serde::Serialize for #kind {
            fn serialize<S>(&self, serializer: S) -> ::core::result::Result<S::Ok, S::Error>
            where
                S: #serde::Serializer,
            {
                let mut state = #serde::Serializer::serialize_struct(serializer, #kind_str, #status_count)?;
                #serde::ser::SerializeStruct::serialize_field(&mut state, "apiVersion", #api_version)?;
                #serde::ser::SerializeStruct::serialize_field(&mut state, "kind", #kind_str)?;
                #serde::ser::SerializeStruct::serialize_field(&mut state, "metadata", &self.metadata)?;
                #serde::ser::SerializeStruct::serialize_field(&mut state, "spec", &self.spec)?;
                #status_ser
                #serde::ser::SerializeStruct::end(state)
            }
        }

        impl #k8s::Resource for #kind {
            const API_VERSION: &'static str = #api_version;
            const GROUP: &'static str = #group;
            const KIND: &'static str = #kind_str;
            const VERSION: &'static str = #version;
            const URL_PATH_SEGMENT: &'static str = #plural;
            type Scope = #scope;
        }

        impl #k8s::ListableResource for #kind {
            const LIST_KIND: &'static str = #list_kind;
        }

        impl #k8s::Metadata for #kind {
            type Ty = #object_meta;
            fn metadata(&self) -> &Self::Ty {
                &self.metadata
            }
            fn metadata_mut(&mut self) -> &mut Self::Ty {
                &mut self.metadata
            }
        }

        impl #kw::crd::CustomResourceExt for #kind {
            fn crd() -> #crd_ty {
                #kind::crd()
            }
            fn try_crd() -> ::core::result::Result<#crd_ty, #kw::crd::SchemaError> {
                #kind::try_crd()
            }
            fn crd_name() -> &'static str {
                #crd_name
            }
            fn api_resource() -> #core::ApiResource {
                #kind::api_resource()
            }
            fn short_names() -> &'static [&'static str] {
                &[#(#short_names),*]
            }
        }

        // The generated type is a kubewright Resource (through kubewright-core's blanket
        // impl over k8s-openapi's traits), so `Api<Kind>` and informers accept it.
        const _: fn() = || {
            fn assert_resource<K: #core::Resource<DynamicType = ()>>() {}
            assert_resource::<#kind>();
        };
    }
}
